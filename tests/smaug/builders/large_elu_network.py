"""The CIFAR-100 large ELU network (eight stacks of same convs with ELU, five pooled), Reference."""

import numpy as np
import smaug as sg


def weights(shape):
  return (np.random.RandomState(1234).rand(*shape) * 0.003).astype(np.float32)


# per stack: (filters, kernel size) of its convolutions, and whether a pool closes it
STACKS = [
    ([(384, 3)], True),
    ([(384, 1), (384, 2), (640, 2), (640, 2)], True),
    ([(640, 1), (768, 2), (768, 2), (768, 2)], True),
    ([(768, 1), (896, 2), (896, 2)], True),
    ([(896, 3), (1024, 2), (1024, 2)], True),
    ([(1024, 1), (1152, 2)], False),
    ([(1152, 1)], False),
    ([(100, 1)], False),
]

with sg.Graph(name="large_elu_ref", backend="Reference", mem_policy=sg.AllDma) as graph:
  act = sg.input_data(sg.Tensor(data_layout=sg.NHWC, tensor_data=weights((1, 32, 32, 3))), name="input")
  channels = 3
  for stack, (convs, pooled) in enumerate(STACKS):
    for index, (filters, k) in enumerate(convs):
      w = sg.Tensor(data_layout=sg.NHWC, tensor_data=weights((filters, k, k, channels)))
      act = sg.nn.convolution(act, w, stride=[1, 1], padding="same", activation="elu",
                              name=f"conv{index}_stack{stack}")
      channels = filters
    if pooled:
      act = sg.nn.max_pool(act, pool_size=[2, 2], stride=[2, 2], name=f"pool_stack{stack}")

graph.print_summary()
graph.write_graph()
