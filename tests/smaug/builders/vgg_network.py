"""The CIFAR-10 "VGG16" (10 same 3×3 convs in four pooled stages, FC 512, FC 10), Reference."""

import numpy as np
import smaug as sg


def weights(shape):
  return (np.random.RandomState(1234).rand(*shape) * 0.005).astype(np.float32)


with sg.Graph(name="vgg_ref", backend="Reference") as graph:
  act = sg.input_data(sg.Tensor(data_layout=sg.NHWC, tensor_data=weights((1, 32, 32, 3))))
  channels = 3
  for stage in [[64, 128], [128, 128], [256, 256, 256], [512, 512, 512]]:
    for filters in stage:
      w = sg.Tensor(data_layout=sg.NHWC, tensor_data=weights((filters, 3, 3, channels)))
      act = sg.nn.convolution(act, w, stride=[1, 1], padding="same", activation="relu")
      channels = filters
    act = sg.nn.max_pool(act, pool_size=[2, 2], stride=[2, 2])
  act = sg.nn.mat_mul(act, sg.Tensor(data_layout=sg.NC, tensor_data=weights((512, 2048))), activation="relu")
  act = sg.nn.mat_mul(act, sg.Tensor(data_layout=sg.NC, tensor_data=weights((10, 512))))

graph.print_summary()
graph.write_graph()
