"""Build LBANN models in Python, the way LBANN's own frontend does, and export them
to LBANN prototext, ONNX or SMAUG.

    from nnbridge import lbann
    x = lbann.Input(dims=(1, 28, 28), name="image")
    conv = lbann.Convolution(x, num_dims=2, out_channels=20, kernel_size=[5], has_bias=True)
    fc = lbann.FullyConnected(lbann.Relu(conv), num_neurons=10, has_bias=True)
    prob = lbann.Softmax(fc, name="prob")
    model = lbann.Model([prob])
    lbann.save_prototext("lenet.prototext", model=model, trainer=lbann.Trainer(mini_batch_size=64))
    model.save("lenet.onnx")            # or "lenet_topo.pbtxt" for SMAUG

Layers take their parents first; every field of the layer's LBANN message is a
keyword argument (the classes are generated from ``nnbridge/protos/lbann``).
Operators (``Sigmoid``, ``Add``, ``Scale`` …) build ``operator_layer``s;
initializers (``ValueInitializer`` …), optimizers (``SGD`` …) and callbacks
(``CallbackPrint`` …) wrap their messages the same way.
"""

from . import models, modules
from .classes import ALL
from .core import (
    KFAC,
    BatchedIterativeOptimizer,
    L2WeightRegularization,
    Layer,
    LayerTerm,
    Metric,
    Model,
    ObjectiveFunction,
    Trainer,
    Weights,
    save_prototext,
    traverse_layer_graph,
)

globals().update(ALL)

__all__ = ["models", "modules", "KFAC", "BatchedIterativeOptimizer", "L2WeightRegularization", "Layer", "LayerTerm",
           "Metric", "Model", "ObjectiveFunction", "Trainer", "Weights", "save_prototext", "traverse_layer_graph", *ALL]
