"""The CIFAR-10 CNN (conv/BN blocks 32, 32 | 64, 64, FC 512, FC 10), Reference, host access by DMA."""

import numpy as np
import smaug as sg


def weights(shape):
  return (np.random.RandomState(1234).rand(*shape) * 0.005).astype(np.float32)


def conv(act, kernel):
  w = sg.Tensor(data_layout=sg.NHWC, tensor_data=weights(kernel))
  return sg.nn.convolution(act, w, stride=[1, 1], padding="same", activation="relu")


def bn(act, channels):
  mean, var, gamma, beta = [sg.Tensor(data_layout=sg.NC, tensor_data=weights((1, channels))) for _ in range(4)]
  return sg.nn.batch_norm(act, mean, var, gamma, beta)


with sg.Graph(name="cnn_ref", backend="Reference", mem_policy=sg.AllDma) as graph:
  act = sg.input_data(sg.Tensor(data_layout=sg.NHWC, tensor_data=weights((1, 32, 32, 3))))
  act = bn(conv(act, (32, 3, 3, 3)), 32)
  act = sg.nn.max_pool(conv(act, (32, 3, 3, 32)), pool_size=[2, 2], stride=[2, 2])
  act = bn(act, 32)
  act = conv(conv(act, (64, 3, 3, 32)), (64, 3, 3, 64))
  act = bn(sg.nn.max_pool(act, pool_size=[2, 2], stride=[2, 2]), 64)
  act = sg.nn.mat_mul(act, sg.Tensor(data_layout=sg.NC, tensor_data=weights((512, 4096))), activation="relu")
  act = sg.nn.mat_mul(act, sg.Tensor(data_layout=sg.NC, tensor_data=weights((10, 512))))

graph.print_summary()
graph.write_graph()
