"""The model corpus shipped inside the onnx package, on the reference backend and through a round trip.

* ``light/light_*.onnx``: the nine light models; like onnx's backend test runner,
  each non-initializer input is fed ``arange(n) / n`` (float32, unknown dims = 1)
  and the expected output is ``light_<name>_output_0.pb``.
* ``pytorch-converted``, ``pytorch-operator``, ``simple``: ``<case>/model.onnx``
  with ``test_data_set_*/input_*.pb`` and ``output_*.pb``.

Each case must agree with its shipped outputs and with onnxruntime, and the
ONNX → IR → ONNX round trip must pass onnx.checker and give the same outputs in
onnxruntime. Only the ``simple`` cases built on ``Gradient`` or
``StringNormalizer`` may end in a clean ``UnsupportedOpError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import nnbridge
from nnbridge.base.errors import NNBridgeError, UnsupportedOpError
from nnbridge.check import run_onnxruntime
from nnbridge.converters.onnx import graph_to_model
from nnbridge.converters.onnx.opset import normalize
from nnbridge.zoo.corpus import TIED_SOFTMAX, logits_model

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
#: ops that onnxruntime itself cannot run here; their simple cases may be unsupported
MAY_BE_UNSUPPORTED = {"Gradient", "StringNormalizer"}
#: onnx's own tolerances for the light models (onnx.backend.test.case.model)
LIGHT_RTOL = {"densenet121": 2e-3}


@dataclass(frozen=True)
class Case:
    name: str
    model_path: Path
    data_sets: tuple[Path, ...]  # test_data_set_* folders; empty for light models
    rtol: float = 1e-3
    atol: float = 1e-7

    def load_data(self, model: onnx.ModelProto) -> list[tuple[list, list]]:
        if not self.data_sets:  # light model: deterministic ramp inputs, one expected output file
            init = {t.name for t in model.graph.initializer}
            feeds = [_ramp(vi) for vi in model.graph.input if vi.name not in init]
            expected = onnx.load_tensor(str(self.model_path).removesuffix(".onnx") + "_output_0.pb")
            return [(feeds, [numpy_helper.to_array(expected)])]
        sets = []
        for folder in self.data_sets:
            inputs = [_load_value(folder / f"input_{i}.pb", vi.type)
                      for i, vi in enumerate(_real_inputs(model)) if (folder / f"input_{i}.pb").exists()]
            outputs = [_load_value(folder / f"output_{i}.pb", vi.type)
                       for i, vi in enumerate(model.graph.output) if (folder / f"output_{i}.pb").exists()]
            sets.append((inputs, outputs))
        return sets


def _ramp(vi: onnx.ValueInfoProto) -> np.ndarray:
    shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim)
    n = int(np.prod(shape))
    return (np.arange(n).reshape(shape) / n).astype(np.float32)


def _real_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    init = {t.name for t in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in init]


def _load_value(path: Path, type_proto: onnx.TypeProto):
    """A tensor, sequence or optional stored as protobuf, decoded like onnx's runner does."""
    data = path.read_bytes()
    kind = type_proto.WhichOneof("value")
    if kind == "sequence_type":
        seq = onnx.SequenceProto()
        seq.ParseFromString(data)
        return [np.asarray(v) for v in numpy_helper.to_list(seq)]
    if kind == "optional_type":
        opt = onnx.OptionalProto()
        opt.ParseFromString(data)
        return numpy_helper.to_optional(opt)
    tensor = onnx.TensorProto()
    tensor.ParseFromString(data)
    return numpy_helper.to_array(tensor)


def _cases() -> list[Case]:
    cases = [Case(p.stem.removeprefix("light_"), p, (), LIGHT_RTOL.get(p.stem.removeprefix("light_"), 1e-3))
             for p in sorted((DATA / "light").glob("light_*.onnx"))]
    for suite in ("pytorch-converted", "pytorch-operator", "simple"):
        for folder in sorted(p for p in (DATA / suite).iterdir() if (p / "model.onnx").exists()):
            cases.append(Case(f"{suite}/{folder.name}", folder / "model.onnx",
                              tuple(sorted(folder.glob("test_data_set_*")))))
    return cases


CASES = _cases()


#: light models make bench runs (matrix): VGG-19 and ZFNet are the costliest plain conv stacks, a
#: family AlexNet keeps in make test
MATRIX = {"vgg19", "zfnet512"}


def _param(case: Case):
    """The light models are whole CNNs: marked slow so that quick local runs can skip them."""
    marks = [] if case.data_sets else [pytest.mark.slow]
    return pytest.param(case, id=case.name, marks=marks + ([pytest.mark.matrix] if case.name in MATRIX else []))


def _assert_close(actual, expected, rtol: float, atol: float, what: str) -> None:
    if isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), f"{what}: sequence length differs"
        for i, (a, e) in enumerate(zip(actual, expected)):
            _assert_close(a, e, rtol, atol, f"{what}[{i}]")
        return
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if expected.dtype.kind in "OUS":
        np.testing.assert_array_equal(actual.astype(str), expected.astype(str), err_msg=what)
        return
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    if expected.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected, err_msg=what)
        return
    np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                               rtol=rtol, atol=atol, err_msg=what)


def _onnxruntime(model: onnx.ModelProto, inputs: list) -> dict:
    """onnxruntime on the file itself, or — for opsets older than its kernels — on the upgraded file."""
    feeds = dict(zip([vi.name for vi in _real_inputs(model)], inputs))
    try:
        return run_onnxruntime(model, feeds)
    except NNBridgeError as exc:
        if "NOT_IMPLEMENTED" not in str(exc):
            raise
    upgraded = onnx.ModelProto()
    upgraded.CopyFrom(model)
    return run_onnxruntime(normalize(upgraded, "upgraded"), feeds)


def _ops(model: onnx.ModelProto) -> set[str]:
    return {n.op_type for n in model.graph.node}


def _may_be_unsupported(case: Case, model: onnx.ModelProto) -> bool:
    return case.name.startswith("simple/") and bool(_ops(model) & MAY_BE_UNSUPPORTED)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_reference_backend_matches_shipped_outputs_and_onnxruntime(case: Case):
    model = onnx.load(case.model_path)
    tied = case.name in TIED_SOFTMAX  # its shipped softmax is round-off's: the logits against onnxruntime's
    model = logits_model(model) if tied else model
    try:
        exe = nnbridge.compile(model, backend="reference")
    except UnsupportedOpError:
        if _may_be_unsupported(case, model):
            return
        raise
    names = exe.input_names
    for inputs, expected in case.load_data(model):
        feeds = dict(zip(names, inputs))
        ours = exe.run(feeds)
        for name, want in zip(exe.output_names, [] if tied else expected):
            _assert_close(ours[name], want, case.rtol, case.atol, f"{case.name}: {name} vs shipped output")
        theirs = _onnxruntime(model, inputs)
        for name, want in theirs.items():
            _assert_close(ours[name], want, max(case.rtol, 1e-4), 1e-5, f"{case.name}: {name} vs onnxruntime")


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_round_trip_passes_checker_and_keeps_numerics(case: Case):
    original = onnx.load(case.model_path)
    exported = graph_to_model(nnbridge.load(original))
    onnx.checker.check_model(exported, full_check=True)
    if _ops(original) & MAY_BE_UNSUPPORTED:
        return  # onnxruntime cannot run these ops, so there is no numeric oracle
    for inputs, expected in case.load_data(original):
        before = _onnxruntime(original, inputs)
        after = _onnxruntime(exported, inputs)
        assert list(before) == list(after)
        for (name, want), shipped in zip(before.items(), expected):
            _assert_close(after[name], want, 1e-5, 1e-6, f"{case.name}: {name} after the round trip")
            _assert_close(after[name], shipped, case.rtol, case.atol, f"{case.name}: {name} vs shipped output")
