"""The ResNet-50 variant of SMAUG's experiments (225×225 input, 16 bottleneck blocks, no average
pool, FC 10), SMV. Blocks read their input's channel count from the tensor (``dims``/``shape``)."""

import numpy as np
import smaug as sg


def weights(shape):
  return (np.random.RandomState(1234).rand(*shape) * 0.008).astype(np.float16)


def kernel(filters, k, channels):
  return sg.Tensor(data_layout=sg.NHWC, tensor_data=weights((filters, k, k, channels)))


def bn(x, channels, activation=None, name="batch_norm"):
  stats = [sg.Tensor(data_layout=sg.NC, tensor_data=weights((1, channels))) for _ in range(4)]
  return sg.nn.batch_norm(x, *stats, activation=activation, name=name)


def block(x, filters, stage, label, strides=None):
  """A bottleneck block; with ``strides`` its shortcut is a strided 1×1 convolution (SMAUG names
  the first batch norm of such a block "batch_norm", and that of an identity block "bn<stage><label>_2a")."""
  f0, f1, f2 = filters
  conv, norm = f"res{stage}{label}", f"bn{stage}{label}"
  chans = x.dims(3) if x.shape.layout == sg.NHWC else x.dims(1)
  y = sg.nn.convolution(x, kernel(f0, 1, chans), stride=[1, 1], padding="same", name=conv + "_2a")
  y = bn(y, f0, "relu") if strides else bn(y, f0, "relu", norm + "_2a")
  y = sg.nn.convolution(y, kernel(f1, 3, f0), stride=strides or [1, 1], padding="same", name=conv + "_2b")
  y = bn(y, f1, "relu", norm + "_2b")
  y = sg.nn.convolution(y, kernel(f2, 1, f1), stride=[1, 1], padding="same", name=conv + "_2c")
  y = bn(y, f2, name=norm + "_2c")
  shortcut = x
  if strides:
    shortcut = sg.nn.convolution(x, kernel(f2, 1, chans), stride=strides, padding="same", name=conv + "_1")
    shortcut = bn(shortcut, f2, name=norm + "_1")
  y = sg.math.add(y, shortcut, name=f"add{stage}_{label}")
  return sg.nn.relu(y, name=f"relu{stage}_{label}")


with sg.Graph(name="resnet_smv", backend="SMV") as graph:
  x = sg.input_data(sg.Tensor(data_layout=sg.NHWC, tensor_data=weights((1, 225, 225, 3))), name="input")
  x = sg.nn.convolution(x, kernel(64, 7, 3), stride=[2, 2], padding="same", name="conv0")
  x = bn(x, 64, "relu", "bn0")
  x = sg.nn.max_pool(x, pool_size=[3, 3], stride=[2, 2], name="pool")
  for stage, filters, blocks in [(2, 64, 3), (3, 128, 4), (4, 256, 6), (5, 512, 3)]:
    for index in range(blocks):
      strides = ((1, 1) if stage == 2 else (2, 2)) if index == 0 else None
      x = block(x, [filters, filters, 4 * filters], stage, "abcdef"[index], strides)
  x = sg.nn.mat_mul(x, sg.Tensor(data_layout=sg.NC, tensor_data=weights((10, 7 * 7 * 2048))), name="fc")

graph.print_summary()
graph.write_graph()
