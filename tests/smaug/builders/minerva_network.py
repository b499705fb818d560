"""Minerva (784 → FC 256 ×3 ReLU → FC 10), SMV, written in SMAUG's frontend API."""

import numpy as np
import smaug as sg


def weights(shape):
  return (np.random.RandomState(1234).rand(*shape) * 0.005).astype(np.float16)


with sg.Graph(name="minerva_smv", backend="SMV") as graph:
  act = sg.input_data(sg.Tensor(data_layout=sg.NHWC, tensor_data=weights((1, 28, 28, 1))))
  for rows, cols, activation in [(256, 784, "relu"), (256, 256, "relu"), (256, 256, "relu"), (10, 256, None)]:
    fc = sg.Tensor(data_layout=sg.NC, tensor_data=weights((rows, cols)))
    act = sg.nn.mat_mul(act, fc, activation=activation)

graph.print_summary()
graph.write_graph()
