"""LBANN's model zoo builders (``lbann.models``), written here from the structure LBANN documents,
so that ``import nnbridge.lbann as lbann; lbann.models.ResNet50(1000)(images)`` writes the layers
and weights LBANN's own frontend writes, message for message (layer names, weights names and
initializers, fields), which ``tests/lbann/test_lbann_models.py`` checks against files LBANN's
frontend wrote.

- ``LeNet``, ``AlexNet``: the classic stacks of ``Convolution2dModule`` / ``FullyConnectedModule``
  with pooling, LRN and dropout between them;
- ``ResNet`` and ``ResNet18`` / ``34`` / ``50`` / ``101`` / ``152`` (``width`` for the wide
  variants), basic or bottleneck residual blocks of convolution + batch norm (+ ReLU);
- ``DenseNet`` (121, 161, 169, 201) as LBANN's vision application builds it (``lbann.models`` has
  none), ending in the class probabilities;
- ``Transformer`` with ``TransformerEncoderLayer`` / ``TransformerDecoderLayer``, over
  ``lbann.modules.MultiheadAttention``.
"""

from .transformer import LayerNorm, Transformer, TransformerDecoderLayer, TransformerEncoderLayer
from .vision import AlexNet, DenseNet, LeNet, ResNet, ResNet18, ResNet34, ResNet50, ResNet101, ResNet152

__all__ = ["AlexNet", "DenseNet", "LeNet", "LayerNorm", "ResNet", "ResNet18", "ResNet34", "ResNet50", "ResNet101",
           "ResNet152", "Transformer", "TransformerDecoderLayer", "TransformerEncoderLayer"]
