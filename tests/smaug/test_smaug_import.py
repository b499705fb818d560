"""SMAUG files the importer must take as the runtime does: control flow (Switch/Merge, as SMAUG's
cond builds it), batch-norm parameters wider than the channels, and SMAUG's summary text."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from real_smaug import matching_output, run_smaug, same_fp16_bits

import nnbridge
import nnbridge.smaug as sg
from nnbridge.base.errors import UnsupportedOpError
from nnbridge.smaug.summary import file_summary

BACKENDS = {"Reference": ("reference", np.float32), "SMV": ("smv", np.float16)}


def ours(topo, backend: str) -> dict[str, np.ndarray]:
    graph = nnbridge.load(topo)
    return nnbridge.run(graph, graph.input_values, backend=BACKENDS[backend][0])


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("flag", [True, False])
def test_cond_imports_and_runs_as_the_runtime_does(tmp_path, backend, flag):
    dtype = BACKENDS[backend][1]
    x = np.linspace(-2, 2, 16, dtype=dtype).reshape(1, 16)
    three = sg.Tensor(data_layout=sg.NC, tensor_data=np.full((1, 16), 3, dtype))
    with sg.Graph(name="cond", backend=backend) as g:
        a = sg.input_data(sg.Tensor(data_layout=sg.NC, tensor_data=x), name="x")
        pred = sg.input_data(sg.Tensor(data_layout=sg.N, tensor_data=np.array([flag])), name="pred")
        sg.control_flow.cond(pred, sg.nn.relu, lambda t: sg.math.mul(t, three), [a])
    topo, _ = g.write_graph(tmp_path / g.name)
    real = run_smaug(topo)
    assert real.ok and real.name == "cond/merge/output0"
    expected = np.maximum(x, 0) if flag else x * 3
    np.testing.assert_allclose(real.output.astype(np.float32), expected.astype(np.float32), rtol=1e-3)
    assert same_fp16_bits(matching_output(ours(topo, backend), real), real.output)
    assert nnbridge.check(topo, backend=BACKENDS[backend][0]).ok


def _scalar(value, dtype):
    return sg.Tensor(data_layout=sg.N, tensor_data=np.array([value], dtype=dtype))


def _smaug_style_cond(case: str, dtype):
    """The three conditionals of SMAUG's control-flow unit tests (branches take no arguments and
    read tensors from outside; nested conds in the last): (result, expected value)."""
    x0, x1, y, z = (_scalar(v, dtype) for v in (2, 5, 10, 20))
    if case == "simple":  # y + z if x0 < x1 else y * z
        return sg.cond(sg.math.less(x0, x1), lambda: sg.math.add(y, z), lambda: sg.math.mul(y, z)), 30
    if case == "call":  # y - 3z if x0 < x1 else y * z
        def minus_three_times(a, b):
            return sg.math.add(a, sg.math.mul(b, _scalar(-3, dtype)))
        return sg.cond(sg.math.less(x0, x1), lambda: minus_three_times(y, z), lambda: sg.math.mul(y, z)), -50

    def when_true(a, b):
        return sg.cond(sg.math.less(a, b), lambda: sg.math.add(a, sg.math.mul(b, _scalar(-1, dtype))),
                       lambda: sg.math.add(a, b))

    def when_false(a, b):
        return sg.cond(sg.math.greater(a, b), lambda: sg.math.mul(a, _scalar(2, dtype)),
                       lambda: sg.math.mul(b, _scalar(2, dtype)))
    return sg.cond(sg.math.less(x0, x1), lambda: when_true(y, z), lambda: when_false(y, z)), -10


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("case", ["simple", "call", "nested"])
def test_smaugs_own_cond_builds_branches_that_run_on_the_real_runtime_and_on_nnbridge(tmp_path, backend, case):
    """sg.cond(pred, true_fn, false_fn) as SMAUG's users write it: each branch is built in a nested
    graph and every tensor it reads from outside goes through a Switch."""
    with sg.Graph(name="cond", backend=backend) as g:
        (result,), expected = _smaug_style_cond(case, BACKENDS[backend][1])
    assert [n.op for n in g.proto.nodes].count(sg.Merge) == (3 if case == "nested" else 1)
    topo, _ = g.write_graph(tmp_path / g.name)
    real = run_smaug(topo)
    assert real.ok and real.name == f"{result.source.name}/output0" and real.output.reshape(-1)[0] == expected
    assert same_fp16_bits(matching_output(ours(topo, backend), real), real.output)


def test_a_merge_that_does_not_pair_switch_branches_is_a_clean_unsupported_error(tmp_path):
    x = np.ones((1, 8), np.float16)
    with sg.Graph(name="odd", backend="SMV") as g:
        a = sg.input_data(sg.Tensor(data_layout=sg.NC, tensor_data=x), name="x")
        p = sg.input_data(sg.Tensor(data_layout=sg.N, tensor_data=np.array([True])), name="p")
        q = sg.input_data(sg.Tensor(data_layout=sg.N, tensor_data=np.array([False])), name="q")
        when_p = sg.control_flow.switch(a, p)[1]
        when_q = sg.control_flow.switch(a, q)[0]
        y = sg.control_flow.merge([when_p, when_q])
        sg.nn.relu(y)
    topo, _ = g.write_graph(tmp_path / g.name)
    with pytest.raises(UnsupportedOpError) as info:
        nnbridge.load(topo)
    assert [(i.op, i.node) for i in info.value.items] == [("Merge", "merge")]  # not its consumer too
    assert "branches of one Switch predicate" in info.value.items[0].reason


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("shape", [(1, 4, 4, 8), (1, 6)])
def test_batch_norm_parameters_wider_than_the_channels(tmp_path, backend, shape):
    """The runtime reads the first C values of each [1, C'] parameter; a negative var′ is allowed."""
    dtype = BACKENDS[backend][1]
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(dtype)
    stats = [rng.standard_normal((1, 16)).astype(dtype) for _ in range(4)]
    with sg.Graph(name="bn", backend=backend) as g:
        a = sg.input_data(sg.Tensor(data_layout=sg.NHWC if len(shape) == 4 else sg.NC, tensor_data=x), name="x")
        sg.nn.batch_norm(a, *[sg.Tensor(data_layout=sg.NC, tensor_data=s) for s in stats])
    topo, _ = g.write_graph(tmp_path / g.name)
    real = run_smaug(topo)
    assert real.ok
    got = matching_output(ours(topo, backend), real)
    if backend == "SMV":
        assert same_fp16_bits(got, real.output)
    else:
        np.testing.assert_allclose(got.reshape(real.output.shape), real.output, rtol=1e-5, atol=1e-6)


def test_summary_in_smaugs_own_style(smaug_dir, cli):
    path = smaug_dir / "lenet5" / "lenet5_smv_topo.pbtxt"
    code, text = cli("summary", path, "--style", "smaug")
    assert code == 0 and text == file_summary(path) == nnbridge.smaug.models.lenet5("SMV").summary()
    assert text.startswith("=" * 65 + "\n      Summary of the network: lenet5_smv (SMV)\n")
    code, text = cli("summary", smaug_dir.parent / "smaug" / "lenet5", "--style", "smaug")
    assert code == 1 and "--style smaug" in text


GOLDENS = Path(__file__).parent / "print_summary"


@pytest.mark.parametrize("golden", sorted(GOLDENS.glob("*.txt")), ids=lambda p: p.stem)
def test_style_smaug_is_byte_for_byte_what_smaugs_own_print_summary_printed(smaug_dir, cli, golden):
    """The goldens were printed by SMAUG's frontend while it built the shipped files (README)."""
    model = golden.stem.removesuffix("_smv").removesuffix("_ref")
    (topo,) = smaug_dir.glob(f"*/{golden.stem}_topo.pbtxt")
    assert model in topo.name
    code, text = cli("summary", topo, "--style", "smaug")
    assert code == 0 and text == golden.read_text()


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_cond_is_written_back_as_switch_and_merge_and_runs_through_onnx_too(tmp_path, backend):
    """A SMAUG cond re-saves byte for byte (its Switches where the file had them, its Merge); through
    ONNX (two Identity nodes per Switch, the Merge a Where) it comes back as a Merge of freshly switched
    branches, which the real runtime runs to the same result for either predicate."""
    from nnbridge.converters.onnx import load_onnx, save_onnx
    from nnbridge.protos.smaug import smaug_types_pb2 as pb

    dtype = BACKENDS[backend][1]
    for flag in (True, False):
        with sg.Graph(name="cond", backend=backend) as g:
            a = sg.input_data(sg.Tensor(data_layout=sg.NC, tensor_data=np.linspace(-2, 2, 16, dtype=dtype)
                                        .reshape(1, 16)), name="x")
            pred = sg.input_data(sg.Tensor(data_layout=sg.N, tensor_data=np.array([flag])), name="pred")
            sg.cond(pred, lambda a=a: sg.nn.relu(a), lambda a=a: sg.math.mul(a, a))
        folder = tmp_path / str(flag)
        topo, params = g.write_graph(folder / g.name)
        graph = nnbridge.load(topo)
        again = nnbridge.save(graph, folder / "again" / topo.name)
        assert (Path(again[0]).read_bytes(), Path(again[1]).read_bytes()) == (topo.read_bytes(), params.read_bytes())
        save_onnx(graph, folder / "cond.onnx")
        back = Path(nnbridge.save(load_onnx(folder / "cond.onnx"), folder / "back" / topo.name,
                                  smaug_inputs=graph.input_values)[0])
        ops = [n.op for n in sg_nodes(back)]
        assert ops.count(pb.Merge) == 1 and ops.count(pb.Switch) >= 2
        real, real_back = run_smaug(topo), run_smaug(back)
        assert real.ok and real_back.ok
        assert same_fp16_bits(real_back.output, real.output)


def sg_nodes(topo: Path):
    from nnbridge.converters.smaug import read_topology

    return read_topology(topo).nodes


@pytest.mark.parametrize("backend", list(BACKENDS))
def test_an_onnx_where_on_one_boolean_is_a_switch_and_merge(tmp_path, backend):
    """ONNX's Where with a one-value condition chooses a whole tensor: SMAUG writes it as a Switch per
    branch and a Merge, and the real runtime picks the branch the condition names; a Where whose
    condition varies per element is refused in one line naming the node."""
    import onnx
    from onnx import TensorProto, helper

    def model(cond_shape):
        nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["x", "x"], ["m"]),
                 helper.make_node("Where", ["c", "r", "m"], ["y"], name="choose")]
        graph = helper.make_graph(nodes, "where", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16]),
                                                   helper.make_tensor_value_info("c", TensorProto.BOOL, cond_shape)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    x = np.linspace(-2, 2, 16, dtype=np.float32).reshape(1, 16)
    onnx.save(model([1]), tmp_path / "where.onnx")
    for flag in (True, False):
        topo = tmp_path / str(flag) / "where_topo.pbtxt"
        nnbridge.convert(str(tmp_path / "where.onnx"), str(topo), smaug_backend=backend,
                         smaug_inputs={"x": x, "c": np.array([flag])})
        real = run_smaug(topo)
        assert real.ok and real.name == "choose/output0"
        np.testing.assert_allclose(real.output.astype(np.float32), np.maximum(x, 0) if flag else x * x, rtol=1e-3)
    onnx.save(model([1, 16]), tmp_path / "elementwise.onnx")
    with pytest.raises(UnsupportedOpError) as refused:
        nnbridge.convert(str(tmp_path / "elementwise.onnx"), str(tmp_path / "e" / "e_topo.pbtxt"),
                         smaug_backend=backend)
    assert [(i.op, i.node) for i in refused.value.items] == [("Where", "choose")]
    assert "condition varies per element" in refused.value.items[0].reason


def test_a_predicate_of_several_values_is_refused_as_the_runtime_refuses_it(tmp_path):
    """SMAUG's runtime validates a Switch's predicate: one value, else it stops before running. nnbridge
    reads such a file (the kernels would take the first value) and refuses to write it, naming every
    Switch and the Merge."""
    x = np.linspace(-2, 2, 16, dtype=np.float32).reshape(1, 16)
    with sg.Graph(name="cond2", backend="Reference") as g:
        a = sg.input_data(sg.Tensor(data_layout=sg.NC, tensor_data=x), name="x")
        pred = sg.input_data(sg.Tensor(data_layout=sg.N, tensor_data=np.array([True, False])), name="pred")
        sg.cond(pred, lambda: sg.nn.relu(a), lambda: sg.math.mul(a, a))
    topo, _ = g.write_graph(tmp_path / g.name)
    real = run_smaug(topo)
    assert real.status == "failed" and "switch was not configured correctly" in real.message
    graph = nnbridge.load(topo)
    np.testing.assert_array_equal(nnbridge.run(graph, graph.input_values)["merge/output0"], np.maximum(x, 0))
    with pytest.raises(UnsupportedOpError) as refused:
        nnbridge.save(graph, tmp_path / "back" / topo.name)
    assert sorted((i.op, i.node) for i in refused.value.items) == [
        ("Switch", "switch"), ("Switch", "switch_1"), ("Switch", "switch_2"), ("Where", "merge")]
    assert all("predicate of 2 values" in i.reason for i in refused.value.items)
    assert not (tmp_path / "back").exists()
