"""Every graph SMAUG's own Python unit tests write (rebuilt with ``nnbridge.smaug`` in
``unit_test_graphs.py``, provenance there) and the files SMAUG's C++ core tests read
(``unit_test_inputs/``) re-save through nnbridge (load → save) message-identical, topology and params,
or are refused with a reason naming what SMAUG's own runtime cannot run, which the real runtime
confirms on the original file (it aborts, or computes the wrong values)."""

from __future__ import annotations

import hashlib
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format
from real_smaug import matching_output, run_smaug
from unit_test_graphs import BUILDERS

import nnbridge
from nnbridge.base.errors import NNBridgeWarning, UnsupportedOpError
from nnbridge.protos.smaug import smaug_graph_pb2 as gpb
from nnbridge.protos.smaug import smaug_tensor_pb2 as tpb

#: graphs refused on re-save: (node, reason) pairs the refusal names, and what the real SMV runtime does
#: with the original file (each is checked below)
REFUSED = {
    "ops/activation_ops_test.py::test_activation_functions": (
        [("Softmax", "softmax", "SMV Softmax needs a padded row of at most 16384 values")], "abort"),
    "ops/ops_test.py::SMVSequentialGraphTest": (
        [("Pad", "padding", "SMV's Padding operator aborts"),
         ("Convolution3d", "conv0", "multiplies the alignment lanes of 'reorder/output0' (3 values padded to 8)")],
        "abort"),
    "ops/ops_test.py::SMVResidualGraphTest": (
        [("Convolution3d", "conv0", "multiplies the alignment lanes of 'reorder/output0' (1 values padded to 8)"),
         ("Convolution3d", "conv1", "multiplies the alignment lanes of 'reorder/output0' (1 values padded to 8)")],
        "wrong"),
}

#: SMAUG's fusing test multiplies random [0, 1) weights through nine convolutions: on SMV its values pass
#: fp16's range, so the writer refuses it by default (naming the first node) and writes it, the same
#: file, when told to (``smaug_allow_overflow``, ``--allow-fp16-overflow``)
OVERFLOWS = {"ops/activation_ops_test.py::test_fusing_activation_functions": "conv_lrelu"}

INPUTS = Path(__file__).parent / "unit_test_inputs"
#: SHA-256 of the copied core-test files (README.md there: upstream blob ids)
SHA256 = {
    "fp16_even_topo.pbtxt": "512ae2d3cf94d8cd927f1b34afb45aa6a8d48c0242bdfa99885834bd760b0215",
    "fp16_even_params.pb": "6845c8d383e8644c313751c049ee640d36bca22864fc41d230990a237ac2b41e",
    "fp16_odd_topo.pbtxt": "e5b26e8df77c129ff7fd84e95806669f6cc9a3fc0bf44d0f039eb06271ebb77e",
    "fp16_odd_params.pb": "35f2caf9dc22e7acc715a4df22bfa811e0a6b54eb6428873539a54f6a8cbea2e",
    "fp16_odd_odd_topo.pbtxt": "c5130249ae6e6d5ceb68f29e792ab111e96cb233fd9ecf0fa22a558249494083",
    "fp16_odd_odd_params.pb": "eece160c5280023afc6d31aadee6b70770edf28b3b8787c589b84831cb5cdf3e",
}


def written(key: str, folder: Path) -> tuple[Path, Path]:
    """The files the unit test's graph writes (the frontend warns about tensors SMAUG's tests make
    outside the graph: they are written as SMAUG writes them, unpadded)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NNBridgeWarning)
        graph = BUILDERS[key]()
    return graph.write_graph(folder / graph.name)


def messages(topo: Path, params: Path) -> tuple[gpb.GraphProto, tpb.TensorDataArray]:
    array = tpb.TensorDataArray()
    array.ParseFromString(params.read_bytes())
    return text_format.Parse(topo.read_text(), gpb.GraphProto()), array


def resave(topo: Path, folder: Path, **options) -> tuple[Path, Path]:
    with warnings.catch_warnings(), np.errstate(over="ignore"):  # the fp16 range check meets inf on purpose
        warnings.simplefilter("ignore", NNBridgeWarning)
        out = nnbridge.save(nnbridge.load(topo), folder / topo.name, **options)
    return Path(out[0]), Path(out[1])


def test_the_corpus_is_every_graph_of_smaugs_python_unit_tests():
    """39 graphs: one per test method that builds one (ops_test's four graph classes count once each;
    unique_name_test's second test_user_supplied_names1 replaces its first, as in Python)."""
    by_file: dict[str, int] = {}
    for key in BUILDERS:
        by_file[key.split("::")[0]] = by_file.get(key.split("::")[0], 0) + 1
    assert by_file == {"ops/activation_ops_test.py": 2, "ops/control_flow_ops_test.py": 4, "ops/data_op_test.py": 6,
                       "ops/fp_precision_test.py": 4, "ops/ops_test.py": 4, "ops/recurrent_test.py": 3,
                       "ops/attention_test.py": 1,
                       "subgraph_test.py": 4, "unique_name_test.py": 5, "tensor_test.py": 6}
    assert set(REFUSED) | set(OVERFLOWS) <= set(BUILDERS)


@pytest.mark.parametrize("key", [k for k in BUILDERS if k not in REFUSED])
def test_a_unit_test_graph_re_saves_message_identical(tmp_path, key):
    topo, params = written(key, tmp_path / "smaug")
    options = {"smaug_allow_overflow": True} if key in OVERFLOWS else {}
    if key in OVERFLOWS:
        with pytest.raises(UnsupportedOpError) as refused:
            resave(topo, tmp_path / "refused")
        assert [(i.node, "beyond fp16's largest finite" in i.reason) for i in refused.value.items] == \
            [(OVERFLOWS[key], True)]
        assert not (tmp_path / "refused").exists()
    back = resave(topo, tmp_path / "back", **options)
    assert messages(*back) == messages(topo, params)
    assert back[0].read_bytes() == topo.read_bytes() and back[1].read_bytes() == params.read_bytes()


@pytest.mark.parametrize("key", list(REFUSED))
def test_a_unit_test_graph_the_runtime_cannot_run_is_refused_naming_the_construct(tmp_path, key):
    topo, _ = written(key, tmp_path / "smaug")
    expected, _ = REFUSED[key]
    with pytest.raises(UnsupportedOpError) as refused:
        resave(topo, tmp_path / "back", smaug_allow_overflow=True)
    found = sorted((i.op, i.node, i.reason) for i in refused.value.items)
    assert [(op, node) for op, node, _ in found] == sorted((op, node) for op, node, _ in expected)
    for (_, _, reason), (_, _, named) in zip(found, sorted(expected)):
        assert named in reason
    assert "\n" not in str(refused.value) and not (tmp_path / "back").exists()


@pytest.mark.parametrize("key", list(REFUSED))
def test_smaugs_runtime_cannot_run_what_is_refused(tmp_path, key):
    """The original file on the real runtime: it aborts, or its output is far from the float32
    computation of the same file (the runtime read alignment lanes nothing wrote)."""
    topo, _ = written(key, tmp_path)
    _, fate = REFUSED[key]
    real = run_smaug(topo)
    if fate == "abort":
        assert real.status == "abort", real.message
        return
    assert real.ok
    graph = nnbridge.load(topo, compute_dtype="float32")
    exact = np.asarray(matching_output(nnbridge.run(graph, graph.input_values), real), np.float64)
    error = np.abs(real.output.astype(np.float64) - exact.reshape(real.output.shape)).max() / np.abs(exact).max()
    assert error > 0.1, error


@pytest.mark.parametrize("name", sorted(re.sub("_topo.pbtxt$", "", n) for n in SHA256 if n.endswith("_topo.pbtxt")))
def test_smaugs_core_test_inputs_re_save_byte_for_byte(tmp_path, name):
    topo, params = INPUTS / f"{name}_topo.pbtxt", INPUTS / f"{name}_params.pb"
    for path in (topo, params):
        assert hashlib.sha256(path.read_bytes()).hexdigest() == SHA256[path.name]
    back = resave(topo, tmp_path)
    assert back[0].read_bytes() == topo.read_bytes() and back[1].read_bytes() == params.read_bytes()


def test_the_attention_graph_runs_on_the_real_runtime_as_on_nnbridge(tmp_path):
    """nnbridge.smaug's BahdanauAttention, as SMAUG's attention_test builds it after an LSTM step: the real
    SMV runtime computes the float32 result within fp16's error, and nnbridge's SMV simulation bit for bit."""
    from real_smaug import same_fp16_bits

    topo, _ = written("ops/attention_test.py::test_bahdanau_attention", tmp_path)
    real = run_smaug(topo)
    assert real.ok and real.name == "bahdanau_attention:concat/output0"
    graph = nnbridge.load(topo)
    assert same_fp16_bits(matching_output(nnbridge.run(graph, graph.input_values, backend="smv"), real), real.output)
    wide = nnbridge.load(topo, compute_dtype="float32")
    exact = np.asarray(matching_output(nnbridge.run(wide, wide.input_values), real), np.float64)
    assert np.abs(real.output.astype(np.float64) - exact).max() / np.abs(exact).max() < 2e-3
