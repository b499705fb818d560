"""nnbridge's LBANN schemas hold every message and field of LBANN's own (develop, v0.104, v0.99 facts);
what we write parses strictly and uses only fields of the targeted version."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from lbann_facts import FACT_FILES, SINCE, facts
from lbann_helpers import assert_fields_in_spec, emitted_fields, strict_parse
from onnx import TensorProto, helper, numpy_helper

import nnbridge
import nnbridge.zoo
from nnbridge.converters.lbann.mapping import LBANN_VERSIONS
from nnbridge.protos import generate


def _schema(version: str):
    """The descriptor pool and package nnbridge reads a file of this LBANN version with."""
    from nnbridge.protos.lbann import lbann_pb2, lbann_v099_pb2

    module, package = (lbann_v099_pb2, "lbann_v099") if version == "0.99" else (lbann_pb2, "lbann_data")
    return module.DESCRIPTOR.pool, package


def _field_facts(descriptor) -> dict:
    kind = {descriptor.TYPE_MESSAGE: "message", descriptor.TYPE_ENUM: "enum"}
    fact = {"number": descriptor.number, "repeated": descriptor.is_repeated,
            "type": kind.get(descriptor.type) or _SCALARS[descriptor.type]}
    if descriptor.message_type is not None:
        fact["message"] = descriptor.message_type.full_name
    if descriptor.enum_type is not None:
        fact["enum"] = descriptor.enum_type.full_name
    if descriptor.containing_oneof is not None:
        fact["oneof"] = descriptor.containing_oneof.name
    return fact


def _scalars() -> dict[int, str]:
    from google.protobuf.descriptor import FieldDescriptor as F

    return {F.TYPE_DOUBLE: "double", F.TYPE_FLOAT: "float", F.TYPE_INT64: "int64", F.TYPE_UINT64: "uint64",
            F.TYPE_INT32: "int32", F.TYPE_UINT32: "uint32", F.TYPE_BOOL: "bool", F.TYPE_STRING: "string",
            F.TYPE_BYTES: "bytes"}


_SCALARS = _scalars()


@pytest.mark.parametrize("version", list(FACT_FILES))
def test_schema_holds_every_message_field_and_enum_value_of_lbanns_own(version):
    """Field by field against the facts dumped from LBANN's .proto files: 0 missing, 0 different.
    Enum numbers are compared for the facts a schema is generated from (develop for Era C: v0.104
    numbered DataType from FLOAT=0; text files name enum values, so both read the same)."""
    pool, package = _schema(version)
    own = version != "0.104"
    problems = []
    for name, info in facts(version)["messages"].items():
        try:
            message = pool.FindMessageTypeByName(package + name.removeprefix("lbann_data"))
        except KeyError:
            problems.append(f"missing message {name}")
            continue
        for fact in info["fields"]:
            field = message.fields_by_name.get(fact["name"])
            if field is None:
                problems.append(f"missing field {name}.{fact['name']}")
                continue
            got = _field_facts(field)
            want = {k: v.replace("lbann_data.", package + ".") if isinstance(v, str) else v
                    for k, v in fact.items() if k != "name"}
            if version == "0.104" and want.get("oneof") is None:
                got.pop("oneof", None)  # develop moved Metric.layer_metric into a oneof
            if got != want:
                problems.append(f"{name}.{fact['name']}: {got} != {want}")
    for name, values in facts(version)["enums"].items():
        enum = pool.FindEnumTypeByName(package + name.removeprefix("lbann_data"))
        for value, number in values.items():
            if value not in enum.values_by_name or (own and enum.values_by_name[value].number != number):
                problems.append(f"enum {name}.{value}")
    assert not problems, f"{len(problems)} differences: {problems[:10]}"


def test_schema_script_output_is_fresh():
    """tools/lbann_schema.py regenerates the .proto files from the facts; they are what is committed."""
    import subprocess
    import sys

    from lbann_facts import FACTS_DIR

    root = generate.HERE.parent.parent
    done = subprocess.run([sys.executable, "tools/lbann_schema.py", "--check", "--facts", str(FACTS_DIR)],
                          cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_generated_code_is_fresh():
    folder = generate.HERE / "lbann"
    for name, text in generate.generate(folder).items():
        assert (folder / name).read_text() == text, f"{name} is stale: run make protos"


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
        assert ("Layer.BatchNormalization", "no_bessel_correction") in used


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
