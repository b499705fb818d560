"""LeNet-5 as SMAUG's experiments build it (two valid 3×3 convs, a pool, two FCs), SMV."""

import numpy as np
import smaug as sg


def weights(shape):
  return (np.random.RandomState(1234).rand(*shape) * 0.005).astype(np.float16)


with sg.Graph(name="lenet5_smv", backend="SMV") as graph:
  act = sg.input_data(sg.Tensor(data_layout=sg.NHWC, tensor_data=weights((1, 28, 28, 1))))
  for kernel in [(32, 3, 3, 1), (32, 3, 3, 32)]:
    act = sg.nn.convolution(act, sg.Tensor(data_layout=sg.NHWC, tensor_data=weights(kernel)), stride=[1, 1],
                            padding="valid", activation="relu")
  act = sg.nn.max_pool(act, pool_size=[2, 2], stride=[2, 2])
  act = sg.nn.mat_mul(act, sg.Tensor(data_layout=sg.NC, tensor_data=weights((128, 4608))), activation="relu")
  act = sg.nn.mat_mul(act, sg.Tensor(data_layout=sg.NC, tensor_data=weights((10, 128))))

graph.print_summary()
graph.write_graph()
