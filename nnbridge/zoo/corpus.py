"""The test corpora that ship inside the ``onnx`` package, with their inputs and
expected outputs, so tests, benchmarks and the demo use one loader.

* ``light``: nine CNNs whose weights are ``ConstantOfShape`` nodes; inputs are the
  deterministic ``arange(n)/n`` tensors that onnx's own backend-test runner uses,
  expected outputs are ``light_<name>_output_0.pb``.
* ``pytorch-converted``, ``pytorch-operator``, ``simple``: ``<case>/model.onnx``
  with ``test_data_set_*/{input,output}_*.pb``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
LIGHT_MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
                "shufflenet", "squeezenet", "vgg19", "zfnet512"]
#: light models whose output is the softmax of logits tied to the last bit: every class has the
#: same constant weights, so the softmax is decided by round-off alone (onnxruntime computes every
#: class alike and gives each 1/1000; OpenBLAS's AVX2 kernels compute the last rows of a tile in
#: another order, the logits then differ by an ulp of 9.5e9, and a few classes take everything).
#: Their logits are what a comparison can judge: ``logits_model``
TIED_SOFTMAX = frozenset({"squeezenet"})


@dataclass
class Case:
    name: str
    model_path: Path
    inputs: list[dict[str, np.ndarray]] = field(default_factory=list)
    outputs: list[list[np.ndarray]] = field(default_factory=list)


def _light_input(vi: onnx.ValueInfoProto) -> np.ndarray:
    shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim)
    n = int(np.prod(shape))
    return (np.arange(n).reshape(shape) / n).astype(np.float32)


def light_case(name: str) -> Case:
    path = DATA / "light" / f"light_{name}.onnx"
    model = onnx.load(path)
    inits = {i.name for i in model.graph.initializer}
    feeds = {vi.name: _light_input(vi) for vi in model.graph.input if vi.name not in inits}
    expected = numpy_helper.to_array(onnx.load_tensor(str(DATA / "light" / f"light_{name}_output_0.pb")))
    return Case(f"light_{name}", path, [feeds], [[expected]])


def logits_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` whose Softmax nodes pass their input through (``TIED_SOFTMAX``): the
    same wiring and output names, the logits in place of the probabilities."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for node in copy.graph.node:
        if node.op_type == "Softmax":
            node.op_type = "Identity"
            del node.attribute[:]
    return copy


def _read_pb(path: Path):
    tensor = onnx.TensorProto()
    tensor.ParseFromString(path.read_bytes())
    if tensor.name or tensor.dims or tensor.data_type:
        return numpy_helper.to_array(tensor)
    seq = onnx.SequenceProto()
    seq.ParseFromString(path.read_bytes())
    return numpy_helper.to_list(seq)


def folder_case(folder: Path) -> Case:
    model = onnx.load(folder / "model.onnx", load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    input_names = [vi.name for vi in model.graph.input if vi.name not in inits]
    case = Case(folder.name, folder / "model.onnx")
    for ds in sorted(folder.glob("test_data_set_*")):
        ins = sorted(ds.glob("input_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
        outs = sorted(ds.glob("output_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
        case.inputs.append({n: _read_pb(p) for n, p in zip(input_names, ins)})
        case.outputs.append([_read_pb(p) for p in outs])
    return case


def cases(collection: str) -> list[Case]:
    """All cases of ``light``, ``pytorch-converted``, ``pytorch-operator`` or ``simple``."""
    if collection == "light":
        return [light_case(n) for n in LIGHT_MODELS]
    return [folder_case(d) for d in sorted((DATA / collection).iterdir()) if (d / "model.onnx").is_file()]
