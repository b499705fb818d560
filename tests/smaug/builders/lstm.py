"""Two stacked LSTM layers (32 inputs, 32 units, 4 timesteps), Reference."""

import numpy as np
import smaug as sg


def weights(shape):
  return (np.random.RandomState(1234).rand(*shape) * 0.005).astype(np.float32)


with sg.Graph(name="lstm_ref", backend="Reference") as graph:
  inputs = sg.input_data(sg.Tensor(data_layout=sg.NTC, tensor_data=weights((1, 4, 32))), name="input")
  layers = [sg.nn.LSTM([sg.Tensor(data_layout=sg.NC, tensor_data=weights((128, 32))) for _ in range(2)],
                       name=f"lstm{i}") for i in range(2)]
  outputs = inputs
  for layer in layers:
    outputs, state = layer(outputs)

graph.print_summary()
graph.write_graph()
