"""The Era C schema matches the spec's field list; what we write parses strictly and uses only listed fields."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from lbann_helpers import assert_fields_in_spec, emitted_fields, lbann_file, strict_parse
from lbann_spec_fields import SINCE, SPEC_FIELDS
from onnx import TensorProto, helper, numpy_helper

import nnbridge
import nnbridge.zoo
from nnbridge.converters.lbann.mapping import LBANN_VERSIONS
from nnbridge.protos import generate


def _descriptor(name: str):
    from google.protobuf import descriptor_pool

    full = name if name.startswith("google.") else f"lbann_data.{name}"
    return descriptor_pool.Default().FindMessageTypeByName(full)


@pytest.mark.parametrize("message", sorted(SPEC_FIELDS))
def test_schema_has_the_spec_numbers(message):
    fields = _descriptor(message).fields_by_name
    for field, number in SPEC_FIELDS[message].items():
        assert field in fields, f"{message}.{field} missing from nnbridge/protos/lbann"
        assert fields[field].number == number, f"{message}.{field}: {fields[field].number} != spec {number}"


def test_generated_code_is_fresh():
    folder = generate.HERE / "lbann"
    for name, text in generate.generate(folder).items():
        assert (folder / name).read_text() == text, f"{name} is stale: run make protos"


def test_shared_era_c_file_uses_listed_fields(shared_data):
    """The spec's list covers what LBANN's own zoo file uses (layers, objective, callbacks …)."""
    pb = strict_parse(lbann_file(shared_data, "model_lenet_mnist_ckpt.prototext"))
    unknown = {(m, f) for m, f, _ in emitted_fields(pb) if f and f not in SPEC_FIELDS.get(m, {})}
    assert not unknown


def _version_fields(message) -> set[tuple[str, str]]:
    return {(m, f) for m, f, _ in emitted_fields(message)}


def _versioned_model() -> onnx.ModelProto:
    """BatchNorm + LayerNorm (whole sample) + a 3-D softmax: the constructs that differ per version."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.random(4, dtype=np.float32) + 0.5, n) for n in ("s", "b", "m", "v")]
    inits += [numpy_helper.from_array(rng.random((4, 3, 5), dtype=np.float32), "g"),
              numpy_helper.from_array(rng.random((4, 3, 5), dtype=np.float32), "h")]
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["bn"]),
             helper.make_node("LayerNormalization", ["bn", "g", "h"], ["ln"], axis=1),
             helper.make_node("Softmax", ["ln"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "versions", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 3, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 3, 5])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])


@pytest.mark.parametrize("version", LBANN_VERSIONS)
def test_version_gated_fields(tmp_path, version):
    from lbann_helpers import roundtrip_vs_onnxruntime

    path = tmp_path / "m.prototext"
    roundtrip_vs_onnxruntime(_versioned_model(), path, lbann_version=version)
    used = _version_fields(strict_parse(path))
    for (message, field), since in SINCE.items():
        if LBANN_VERSIONS.index(version) < LBANN_VERSIONS.index(since):
            assert (message, field) not in used, f"{message}.{field} needs LBANN {since}, written for {version}"
    if version != "0.103":
        assert ("BatchNormalization", "no_bessel_correction") in used


@pytest.mark.parametrize("name", ["lenet5", "resnet_tiny", "mlp"])
def test_writer_output_is_strict_listed_and_stable(tmp_path, name):
    first, second = tmp_path / "a.prototext", tmp_path / "b.prototext"
    nnbridge.convert(nnbridge.zoo.build(name), first, lbann_weights="npy")
    pb = strict_parse(first)
    assert_fields_in_spec(pb)
    assert pb.trainer.mini_batch_size == 1 and pb.optimizer.HasField("no_optimizer")
    assert not any(layer.WhichOneof("layer_type") == "split" for layer in pb.model.layer)
    nnbridge.convert(first, second, lbann_weights="npy")  # re-write of our own output is identical
    assert second.read_text().replace("b_weights/", "a_weights/") == first.read_text()


def test_any_parameters_use_the_expanded_form(tmp_path):
    graph = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["y"])], "s",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])])
    path = tmp_path / "s.prototext"
    nnbridge.convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)]), path)
    assert "[type.googleapis.com/lbann_data.SigmoidOperator] {" in path.read_text()
    raw = ('model { layer { name: "x" input {} } layer { name: "c" parents: "x" operator_layer { ops { '
           'parameters { type_url: "type.googleapis.com/lbann_data.AddConstantOperator" '
           'value: "\\t\\000\\000\\000\\000\\000\\000\\360?" } } } } }')
    (tmp_path / "raw.prototext").write_text(raw)
    g = nnbridge.load(tmp_path / "raw.prototext", input_shapes={"x": (3,)})
    x = np.arange(3, dtype=np.float32).reshape(1, 3)
    np.testing.assert_array_equal(nnbridge.run(g, {"x": x})["c"], x + 1.0)
