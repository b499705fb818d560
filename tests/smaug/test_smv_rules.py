"""Each rule by which nnbridge refuses or rewrites an SMV file, confirmed with the real runtime:
a file built with SMAUG's frontend API (``nnbridge.smaug``, which writes what it is told) that
breaks the rule is computed wrong, or stops the runtime; the same file within the rule is right.
On every such file the SMV simulator reproduces the runtime's output (bit for bit where the
runtime is deterministic) and ``check --backend smv`` gives the verdict the runtime earns.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from real_smaug import as_onnx_layout, matching_output, relative_error, run_smaug, same_fp16_bits, stored_feeds
from test_real_runtime import onnxruntime_output, write

import nnbridge
import nnbridge.smaug as sg
from nnbridge.backends.smv.layers import ConvLayer, PoolLayer
from nnbridge.backends.smv.tiling import plan_layer
from nnbridge.base.errors import ShapeError, UnsupportedOpError
from nnbridge.converters.smaug.smv_rules import hazards
from nnbridge.protos.smaug import smaug_tensor_pb2 as tpb
from nnbridge.zoo import OnnxBuilder

RNG = np.random.default_rng(5)


def fp16(shape, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float16)


def real(graph: sg.Graph, folder, intended: np.ndarray | None = None, written: bool = True) -> np.ndarray:
    """The real runtime's output; the simulator must give the same bits (NaN where the runtime
    reads memory nothing wrote, ``written=False``), and check's verdict must say whether that
    output is the ``intended`` one."""
    topo, _ = graph.write_graph(folder / graph.name)
    run = run_smaug(topo)
    assert run.ok, run.message
    loaded = nnbridge.load(topo)
    ours = matching_output(nnbridge.run(loaded, loaded.input_values, backend="smv"), run)
    defined = ~np.isnan(ours.astype(np.float32))
    assert defined.all() == written and same_fp16_bits(ours[defined], run.output[defined])
    if intended is not None:
        right = np.array_equal(run.output.astype(np.float32), intended.astype(np.float32))
        assert nnbridge.check(topo, backend="smv").ok == right
    return run.output.astype(np.float32)


def smv_graph(name: str, array: np.ndarray, layout: int) -> tuple[sg.Graph, sg.Tensor]:
    g = sg.Graph(name=name, backend="SMV")
    return g, sg.input_data(sg.Tensor(alignment=8, data_layout=layout, tensor_data=array), name="x", graph=g)


# -- CPU operators that copy whole padded rows ------------------------------------------------
@pytest.mark.parametrize("widths, overruns", [((3, 5), True), ((1, 15), True), ((8, 3), False), ((3, 8), False),
                                              ((5, 5), False)])
def test_concat_along_channels_overruns_rows(tmp_path, widths, overruns):
    parts = [fp16((1, 2, 2, c)) for c in widths]
    g, x = smv_graph("cat", parts[0], sg.NHWC)
    y = sg.input_data(sg.Tensor(alignment=8, data_layout=sg.NHWC, tensor_data=parts[1]), name="y", graph=g)
    sg.tensor.concat([x, y], axis=3)
    intended = np.concatenate(parts, 3).astype(np.float32)
    wrong = not np.array_equal(real(g, tmp_path, intended), intended)
    assert wrong == overruns == bool(hazards(g.proto))


@pytest.mark.parametrize("shape, multiples, overruns", [((2, 3), [1, 2], True), ((2, 3), [1, 3], False),
                                                        ((2, 5), [1, 2], False), ((2, 3), [3, 1], False)])
def test_repeat_along_the_last_axis_overruns_rows(tmp_path, shape, multiples, overruns):
    a = fp16(shape)
    g, x = smv_graph("rep", a, sg.NC)
    sg.tensor.repeat(x, multiples)
    intended = np.tile(a, multiples).astype(np.float32)
    wrong = not np.array_equal(real(g, tmp_path, intended), intended)
    assert wrong == overruns == bool(hazards(g.proto))


@pytest.mark.parametrize("src, dst, scrambles", [((9, 1), (1, 9), True), ((3, 11), (11, 3), True),
                                                 ((2, 8), (1, 16), False), ((2, 5), (1, 10), False)])
def test_reshape_with_equal_padding_copies_raw_storage(tmp_path, src, dst, scrambles):
    a = fp16(src)
    g, x = smv_graph("rs", a, sg.NC)
    sg.tensor.reshape(x, dst, sg.NC)
    intended = a.reshape(dst).astype(np.float32)
    written = (dst[0] * -(-dst[1] // 8) * 8 <= src[0] * -(-src[1] // 8) * 8) or not scrambles
    wrong = not np.array_equal(real(g, tmp_path, intended, written), intended)
    assert wrong == scrambles == bool(hazards(g.proto))


# -- alignment lanes ---------------------------------------------------------------------------
@pytest.mark.parametrize("kernel", ["conv", "fc"])
def test_conv_and_fc_multiply_their_input_alignment_lanes(tmp_path, kernel):
    """NaN stored in the input's padding lanes (× zero weights) makes every output NaN."""
    if kernel == "conv":
        g, x = smv_graph("lanes", fp16((1, 4, 4, 3)), sg.NHWC)
        w = sg.Tensor(alignment=8, data_layout=sg.NHWC, tensor_data=fp16((8, 3, 3, 3)))
        sg.nn.convolution(x, w, [1, 1], "same")
        stored, logical = (1, 4, 4, 8), 3
    else:
        g, x = smv_graph("lanes", fp16((1, 10)), sg.NC)
        sg.nn.mat_mul(x, sg.Tensor(alignment=8, data_layout=sg.NC, tensor_data=fp16((8, 10))))
        stored, logical = (1, 16), 10
    topo, params = g.write_graph(tmp_path / g.name)
    clean = run_smaug(topo).output
    array = tpb.TensorDataArray()
    array.ParseFromString(params.read_bytes())
    entry = next(e for e in array.data_array if e.name == "x/input0")
    values = np.asarray(entry.half_data, "<i4").view(np.float16).reshape(stored).copy()
    values[..., logical:] = np.nan
    del entry.half_data[:]
    entry.half_data.extend(values.reshape(-1).view("<i4").tolist())
    params.write_bytes(array.SerializeToString())
    assert np.isfinite(clean.astype(np.float32)).all() and np.isnan(run_smaug(topo).output.astype(np.float32)).all()


def test_a_runtime_reorder_leaves_the_alignment_lanes_uninitialised(tmp_path):
    """An NCHW input reordered to NHWC at run time (what SMAUG's frontend does): the conv reads
    garbage lanes; with ELU many outputs are NaN. nnbridge stores SMV inputs NHWC instead."""
    x, w = fp16((1, 3, 8, 8)), fp16((8, 3, 3, 3), 0.3)
    g, a = smv_graph("reorder", x, sg.NCHW)
    sg.nn.convolution(a, sg.Tensor(alignment=8, data_layout=sg.NHWC, tensor_data=w), [1, 1], "same", activation="elu",
                      activation_params={"alpha": 1.0})
    assert [h.op for h in hazards(g.proto)] == ["Convolution3d"]
    topo, _ = g.write_graph(tmp_path / g.name)
    assert np.isnan(run_smaug(topo).output.astype(np.float32)).any()
    # the simulator cannot know the garbage: it says the result is undefined (NaN), and check disagrees
    loaded = nnbridge.load(topo)
    assert np.isnan(next(iter(nnbridge.run(loaded, loaded.input_values, backend="smv").values()))).all()
    result = nnbridge.check(topo, backend="smv")
    assert not result.ok and any("uninitialised" in note for note in result.notes)


def test_padding_aborts_on_smv(tmp_path):
    g, x = smv_graph("pad", fp16((1, 4, 4, 8)), sg.NHWC)
    sg.tensor.padding(x, [0, 0, 1, 1, 1, 1, 0, 0])
    topo, _ = g.write_graph(tmp_path / g.name)
    run = run_smaug(topo)
    assert run.status == "abort" and "dataType" in run.message
    with pytest.raises(UnsupportedOpError, match="Padding aborts on SMV"):
        nnbridge.compile(topo, backend="smv")


# -- row tails of the softmax and post-FC batch-norm kernels ------------------------------------
def test_softmax_normalises_only_whole_vectors_of_a_row(tmp_path):
    a = fp16((1, 10))
    g, x = smv_graph("softmax", a, sg.NC)
    sg.nn.softmax(x)
    out = real(g, tmp_path)
    assert not nnbridge.check(g.write_graph(tmp_path / g.name)[0], backend="smv").ok
    head = np.exp(a[0, :8].astype(np.float64))
    np.testing.assert_allclose(out[0, :8], head / head.sum(), rtol=2e-3)  # the first 8 values only


@pytest.mark.parametrize("rows, width", [(1, 12), (2, 8)])
def test_post_fc_batch_norm_misses_row_tails_and_rows_after_the_first(tmp_path, rows, width):
    a = fp16((rows, width))
    g, x = smv_graph("bn", a, sg.NC)
    ones = np.ones((1, width), np.float16)
    stats = [np.zeros((1, width), np.float16), ones, ones, np.full((1, width), 2.0, np.float16)]
    sg.nn.batch_norm(x, *[sg.Tensor(alignment=8, data_layout=sg.NC, tensor_data=s) for s in stats])
    exact = (a.astype(np.float32) + 2).astype(np.float16).astype(np.float32)
    out = real(g, tmp_path, exact)
    np.testing.assert_array_equal(out[0, :8], exact[0, :8])
    assert not np.array_equal(out, exact)


def test_a_file_reading_scratchpad_leftovers_runs_every_operator_on_its_whole_batch(tmp_path):
    """A softmax row tail keeps what earlier kernels left in the scratchpads, and that depends on
    how each of them ran: a file holding one runs every operator on its whole batch, as SMAUG's
    runtime does, and the report says why; the same convolution alone runs as one-sample calls
    (SMAUG's tiler cuts two samples of it worse, docs/smv.md)."""
    def convolution(tail: bool):
        g, x = smv_graph("tail" if tail else "conv", fp16((2, 15, 15, 91)), sg.NHWC)
        y = sg.nn.convolution(x, sg.Tensor(alignment=8, data_layout=sg.NHWC, tensor_data=fp16((2, 3, 3, 91), 0.1)),
                              [1, 1], "same", activation="relu")
        if tail:
            sg.nn.softmax(sg.tensor.flatten(y))  # 450 values a row: the last 2 are leftovers
        exe = nnbridge.compile(g.write_graph(tmp_path / g.name)[0], backend="smv", num_accels=2)
        return {row["name"]: row.get("calls") for row in exe.report.rows}, exe.report.notes

    alone, notes = convolution(tail=False)
    assert alone["conv"] == 2 and not any("leave in the scratchpads" in note for note in notes)
    calls, notes = convolution(tail=True)
    assert calls["conv"] == calls["softmax"] == 1
    assert any(note.startswith("calls: every operator runs on its whole batch") and "softmax" in note for note in notes)


# -- SMAUG's tiler ----------------------------------------------------------------------------
def test_a_conv_the_tiler_rejects_aborts_and_is_refused(tmp_path):
    g, x = smv_graph("stem", fp16((1, 224, 224, 3)), sg.NHWC)
    sg.nn.convolution(x, sg.Tensor(alignment=8, data_layout=sg.NHWC, tensor_data=fp16((64, 3, 3, 3))), [1, 1], "same")
    topo, _ = g.write_graph(tmp_path / "real")
    run = run_smaug(topo)
    assert run.status == "abort" and "Failed to get best tiling config" in run.message
    with pytest.raises(ShapeError, match="Failed to get best tiling config"):
        plan_layer(ConvLayer(name="stem", input=(1, 224, 224, 3), kernels=64, kh=3, kw=3))
    b = OnnxBuilder("stem")
    b.output(b.conv(b.input("x", [1, 3, 224, 224]), 3, 64, 3))
    with pytest.raises(UnsupportedOpError, match="Failed to get best tiling config"):
        write(b.model(), "SMV", tmp_path / "ours")


def test_a_max_pool_the_tiler_pairs_wrongly_crashes_and_is_split_by_channels(tmp_path):
    g, x = smv_graph("pool", fp16((1, 55, 55, 128)), sg.NHWC)
    sg.nn.max_pool(x, [3, 3], [2, 2])
    topo, _ = g.write_graph(tmp_path / "real")
    assert run_smaug(topo).status == "segfault"
    with pytest.raises(ShapeError, match="crashes"):
        plan_layer(PoolLayer(name="pool", input=(1, 55, 55, 128), ph=3, pw=3, stride_h=2, stride_w=2))
    b = OnnxBuilder("pool")
    b.output(b.op("MaxPool", [b.input("x", [1, 128, 55, 55])], "pool", kernel_shape=[3, 3], strides=[2, 2]))
    model = b.model()
    ours = write(model, "SMV", tmp_path / "ours")
    assert [n.op for n in nnbridge.converters.smaug.read_topology(ours).nodes].count(3) == 2  # 2 x 64 channels
    run = run_smaug(ours)
    expected = onnxruntime_output(model, stored_feeds(ours, model))
    assert run.ok and relative_error(as_onnx_layout(run, expected), expected) == 0


def test_alexnet_stem_finds_no_tiling_dimensions(tmp_path):
    """light_bvlc_alexnet's 11x11/4 stem conv on 224x224x3: no tiling dimensions exist on SMV."""
    with pytest.raises(ShapeError, match="Unable to find a supported set of tiling dimensions"):
        plan_layer(ConvLayer(name="stem", input=(1, 224, 224, 3), kernels=64, kh=11, kw=11, stride_h=4, stride_w=4,
                             same=False))
    g, x = smv_graph("alexnet", fp16((1, 224, 224, 3)), sg.NHWC)
    w = sg.Tensor(alignment=8, data_layout=sg.NHWC, tensor_data=fp16((64, 11, 11, 3)))
    sg.nn.convolution(x, w, [4, 4], "valid")
    topo, _ = g.write_graph(tmp_path / g.name)
    run = run_smaug(topo)
    assert not run.ok and "Unable to find a supported set of tiling dimensions" in run.message



def test_softmax_without_max_subtraction_overflows_as_the_runtime_does(tmp_path):
    """A logit above 88.72 overflows the kernel's exp: the row is NaN in real SMAUG and in the
    simulator, and check names the node and the cause."""
    a = np.linspace(0, 100, 16).astype(np.float16).reshape(1, 16)
    g, x = smv_graph("big_logits", a, sg.NC)
    sg.nn.softmax(x)
    topo, _ = g.write_graph(tmp_path / g.name)
    run = run_smaug(topo)
    assert np.isnan(run.output.astype(np.float32)[0, -2:]).all()  # inf · 0; the others 0
    loaded = nnbridge.load(topo)
    assert same_fp16_bits(matching_output(nnbridge.run(loaded, loaded.input_values, backend="smv"), run), run.output)
    result = nnbridge.check(topo, backend="smv")
    assert not result.ok and any(note.startswith("softmax: SMV's softmax does not subtract") for note in result.notes)


def test_a_new_user_converting_what_smv_cannot_run_reads_one_line_per_reason(tmp_path, cli):
    b = OnnxBuilder("mixed")
    x = b.input("x", [1, 3, 5, 5])
    y = b.op("Relu", [b.conv(x, 3, 5, 3, hint="c1")])
    cat = b.op("Concat", [x, y], "cat", axis=1)  # 3 + 5 channels: the copy overruns rows
    flat = b.op("Flatten", [b.op("Relu", [b.conv(cat, 8, 6, 3, hint="c2")])], "flat", axis=1)  # 150 features
    b.output(b.dense(flat, 150, 4, "fc"))
    path = tmp_path / "mixed.onnx"
    onnx.save(b.model(), path)
    code, text = cli("convert", path, tmp_path / "out" / "m_topo.pbtxt")
    lines = text.strip().splitlines()
    assert code == 1 and "SMAUG (SMV) does not support 2 node(s) [ops: Concat, InnerProduct]:" in lines[0]
    assert [line.split(" (")[0].strip() for line in lines[1:]] == ["Concat", "InnerProduct"]
    assert "overruns" in lines[1] and "uninitialised" in lines[2]
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def _scaled_conv(scale: float) -> onnx.ModelProto:
    b = OnnxBuilder("loud_conv")
    x = b.input("x", [1, 8, 6, 6])
    w = b.const("w", np.full((8, 8, 3, 3), scale, np.float32))
    b.output(b.op("Relu", [b.op("Conv", [x, w], "conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])]))
    return b.model()


def test_values_beyond_fp16_range_are_refused_and_the_runtime_confirms_it(tmp_path, cli):
    """A conv whose output on the stored input passes 65504 gives inf in real SMV; the same conv
    within fp16's range is right. The writer refuses the first, naming the node; a user who
    stores another input (``--smaug-input``) or writes it anyway (``--allow-fp16-overflow``) can."""
    ones = np.ones((1, 8, 6, 6), np.float32)
    with pytest.raises(UnsupportedOpError) as info:
        nnbridge.save(nnbridge.load(_scaled_conv(1000.0)), tmp_path / "no" / "m_topo.pbtxt",
                      smaug_inputs={"x": ones})
    [item] = info.value.items
    assert item.node == "conv" and "reaches 7.2e+04" in item.reason
    assert not (tmp_path / "no").exists() or not any((tmp_path / "no").iterdir())
    for scale, finite in ((1000.0, False), (100.0, True)):
        folder = tmp_path / str(scale)
        topo, _ = nnbridge.save(nnbridge.load(_scaled_conv(scale)), folder / "m_topo.pbtxt",
                                smaug_inputs={"x": ones}, smaug_allow_overflow=True)
        run = run_smaug(topo)
        assert run.ok, run.message
        assert np.isfinite(run.output.astype(np.float32)).all() == finite

    source = tmp_path / "loud.onnx"
    onnx.save(_scaled_conv(1000.0), source)
    np.save(tmp_path / "ones.npy", ones)
    dst = tmp_path / "cli" / "m_topo.pbtxt"
    code, text = cli("convert", source, dst, "--smaug-input", f"x={tmp_path / 'ones.npy'}")
    lines = text.strip().splitlines()
    assert code == 1 and len(lines) == 2 and lines[1].strip().startswith("Conv (node 'conv'): its output")
    np.save(tmp_path / "small.npy", ones / 10)
    code, text = cli("convert", source, dst, "--smaug-input", f"x={tmp_path / 'small.npy'}")
    assert code == 0, text
    assert nnbridge.load(dst).input_values["x"].max() == np.float16(0.1)
    code, text = cli("convert", source, tmp_path / "cli2" / "m_topo.pbtxt", "--allow-fp16-overflow",
                     "--smaug-input", f"x={tmp_path / 'ones.npy'}")
    assert code == 0, text
