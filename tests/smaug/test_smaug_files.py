"""The shipped SMAUG files: counts, byte-exact text/binary round trips, params entries, IR loading."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from smaug_data import COUNTS, IO, PARAMS, SCALE, TOPOLOGIES

from nnbridge.converters.smaug import load_smaug, read_params, read_topology
from nnbridge.converters.smaug.files import topology_text
from nnbridge.converters.smaug.params import storage_size
from nnbridge.ir import Layout
from nnbridge.protos.smaug import smaug_types_pb2 as pb


@pytest.mark.parametrize("rel", TOPOLOGIES)
def test_topology_counts_and_text_round_trip(smaug_dir, rel):
    path = smaug_dir / rel
    graph = read_topology(path)
    nodes, ops = COUNTS[rel]
    assert len(graph.nodes) == nodes
    assert Counter(pb.OpType.Name(n.op) for n in graph.nodes) == ops
    assert graph.mem_policy == pb.AllDma and graph.backend in ("SMV", "Reference")
    assert topology_text(graph).encode() == path.read_bytes()


@pytest.mark.parametrize("rel", PARAMS)
def test_params_binary_round_trip_and_storage_sizes(smaug_dir, rel):
    path = smaug_dir / rel
    array = read_params(path)
    assert array.SerializeToString() == path.read_bytes()
    topo = read_topology(smaug_dir / rel.replace("_params.pb", "_topo.pbtxt"))
    entries = {e.name: e for e in array.data_array}
    data_nodes = [n for n in topo.nodes if n.op == pb.Data]
    assert [e.name for e in array.data_array] == [n.input_tensors[0].name for n in data_nodes]
    for node in data_nodes:
        t = node.input_tensors[0]
        stored = storage_size(list(t.shape.dims), t.shape.alignment)
        entry = entries[t.name]
        count = 2 * len(entry.half_data) if t.data_type == pb.Float16 else len(entry.float_data)
        assert count == stored + (stored % 2 if t.data_type == pb.Float16 else 0)


def test_fp16_packing_words(smaug_dir):
    entries = {e.name: e for e in read_params(smaug_dir / "minerva/minerva_smv_params.pb").data_array}
    words = np.array(entries["data/input0"].half_data, dtype=np.int64) & 0xFFFFFFFF
    # one value then seven zero pad elements per row of 8: words 1-3 are pure padding
    assert len(words) == 3136 and words[0] == 0x13D8 and not words[1:4].any() and words[4] != 0
    weights = np.array(entries["data_1/input0"].half_data[:3], dtype=np.int64) & 0xFFFFFFFF
    assert list(weights) == [0x1A5F13D8, 0x1C05187B, 0x15951BFD]


@pytest.mark.parametrize("rel", TOPOLOGIES)
def test_every_model_loads_into_the_ir(smaug_dir, rel):
    graph = load_smaug(smaug_dir / rel, synthetic_scale=SCALE.get(rel, 0.005))
    graph.verify()
    source, sink = IO[rel]
    assert [v.name for v in graph.inputs] == [source]
    assert graph.inputs[0].type.layout == Layout.NHWC  # the file's own layout is kept
    assert [v.name for v in graph.outputs] == [sink]
    assert graph.outputs[0].type.shape == (1, 10)
    synthetic = graph.metadata.get("nnbridge.synthetic_params") == "true"
    assert synthetic == (rel.replace("_topo.pbtxt", "_params.pb") not in PARAMS)
    # the IR has a layout transform only where storage order is observable
    reorders = [n for n in graph.nodes if n.op == "Reorder" and n.inputs[0].const is None]
    assert len(reorders) == (0 if rel.startswith("minerva") else 1)  # the NHWC input entering a conv


def test_same_padding_shapes_of_resnet_stem(smaug_dir):
    graph = load_smaug(smaug_dir / "imagenet-resnet/resnet_smv_topo.pbtxt", synthetic_scale=0.008)
    conv = next(n for n in graph.nodes if n.op == "Conv")
    assert conv.attrs["pads"] == [3, 3, 3, 3] and conv.attrs["strides"] == [2, 2]
    assert conv.outputs[0].type.shape == (1, 64, 113, 113)
    pool = next(n for n in graph.nodes if n.op == "MaxPool")
    assert pool.outputs[0].type.shape == (1, 64, 56, 56)
    # 53 conv + 53 BN + 49 ReLU + 16 add + pool + flatten + fc, and one Reorder: the NHWC input; the
    # NHWC flatten order is carried by the FC weights (rows permuted), not by a second transform
    assert len(graph.nodes) == 175


def test_synthetic_params_follow_the_recipe(smaug_dir):
    graph = load_smaug(smaug_dir / "cifar10-cnn/cnn_smv_topo.pbtxt")
    weight = graph.initializers["data_1"]  # [32,3,3,3] NHWC kernel, stored OIHW in the IR
    expected = (np.random.RandomState(1234).rand(32, 3, 3, 3) * 0.005).astype(np.float16)
    assert np.array_equal(weight, expected.transpose(0, 3, 1, 2))


@pytest.mark.parametrize("rel", TOPOLOGIES)
def test_fast_reader_equals_protobuf_text_format(smaug_dir, rel):
    from google.protobuf import text_format

    from nnbridge.converters.smaug.fast_text import parse_printed
    from nnbridge.protos.smaug import smaug_graph_pb2

    text = (smaug_dir / rel).read_text()
    fast, reference = smaug_graph_pb2.GraphProto(), smaug_graph_pb2.GraphProto()
    assert parse_printed(text, fast)
    text_format.Parse(text, reference)
    assert fast == reference


def test_any_valid_text_format_is_accepted(smaug_dir):
    """Comments, list syntax, other field order: the fast reader declines, protobuf parses."""
    from nnbridge.converters.smaug.fast_text import parse_printed
    from nnbridge.converters.smaug.files import parse_topology
    from nnbridge.protos.smaug import smaug_graph_pb2

    text = (smaug_dir / "lenet5/lenet5_smv_topo.pbtxt").read_text()
    odd = "# a comment\nbackend: \"SMV\"\n" + text.replace("backend: \"SMV\"\n", "").replace(
        "      stride: 1\n      stride: 1\n", "      stride: [1, 1]\n")
    assert not parse_printed(odd, smaug_graph_pb2.GraphProto())
    assert parse_topology(odd) == read_topology(smaug_dir / "lenet5/lenet5_smv_topo.pbtxt")
