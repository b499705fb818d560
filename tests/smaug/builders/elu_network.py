"""The CIFAR-100 ELU network (stacks of same convs with ELU, each closed by a 2×2 pool), Reference.

The node names are those of SMAUG's own file, including its stack 4, whose second convolution is
also named "conv0_stack4" (so SMAUG's frontend calls it "conv0_stack4_1").
"""

import numpy as np
import smaug as sg


def weights(shape):
  return (np.random.RandomState(1234).rand(*shape) * 0.005).astype(np.float32)


# per stack: its convolutions as (node name, filters, kernel size), and whether a pool closes it
STACKS = [
    ([("conv0_stack0", 192, 5)], True),
    ([("conv0_stack1", 192, 1), ("conv1_stack1", 240, 3)], True),
    ([("conv0_stack2", 240, 1), ("conv1_stack2", 260, 2)], True),
    ([("conv0_stack3", 260, 1), ("conv1_stack3", 280, 2)], True),
    ([("conv0_stack4", 280, 1), ("conv0_stack4", 300, 2)], True),
    ([("conv0_stack5", 300, 1)], False),
    ([("conv0_stack6", 100, 1)], False),
]

with sg.Graph(name="elu_ref", backend="Reference", mem_policy=sg.AllDma) as graph:
  act = sg.input_data(sg.Tensor(data_layout=sg.NHWC, tensor_data=weights((1, 32, 32, 3))), name="input")
  channels = 3
  for number, (convs, pooled) in enumerate(STACKS):
    for name, filters, k in convs:
      w = sg.Tensor(data_layout=sg.NHWC, tensor_data=weights((filters, k, k, channels)))
      act = sg.nn.convolution(act, w, stride=[1, 1], padding="same", activation="elu", name=name)
      channels = filters
    if pooled:
      act = sg.nn.max_pool(act, pool_size=[2, 2], stride=[2, 2], name=f"pool_stack{number}")

graph.print_summary()
graph.write_graph()
