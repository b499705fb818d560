"""Shared checks for the LBANN tests: strict parsing, LBANN's schema facts, round trips via onnxruntime."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnx
from google.protobuf import any_pb2, text_format
from lbann_facts import SINCE, fields

import nnbridge
from nnbridge.api.inputs import random_inputs
from nnbridge.check import run_onnxruntime
from nnbridge.converters.onnx import graph_to_model
from nnbridge.protos.lbann import lbann_pb2

SHA256 = {
    "model_lenet_mnist_ckpt.prototext": "e4568669822500863ee8363d249935edae855566edf3d2df4c55580f6701fdaa",
    "mnist_cnn.prototext": "fc8101acdfcc9723f457aacf40ed5fcb2344b7aff24246d6144bdc523a33e99e",
    "model_dnn_chem_ecfp.prototext": "696bad840cdc56e09d46d7fd4d62ef346d32903870e8ea6aed7c44d951ba7bcb",
    "legacy/model_lenet_mnist.prototext": "09b3ba6106720750fd891c8a21f72574842e10873241487ff7199d815a3ab1ba",
}


def lbann_file(shared_data: Path, name: str) -> Path:
    path = shared_data / "lbann" / name
    assert hashlib.sha256(path.read_bytes()).hexdigest() == SHA256[name], f"{path} differs from upstream"
    return path


def strict_parse(path: Path) -> lbann_pb2.LbannPB:
    """protobuf's strict text parser (unknown fields are errors) against our Era C schema."""
    return text_format.Parse(path.read_text(), lbann_pb2.LbannPB())


def emitted_fields(message, found: set | None = None) -> set[tuple[str, str, int]]:
    """(message, field, number) of every field set anywhere in ``message`` (Any payloads unpacked)."""
    found = set() if found is None else found
    name = message.DESCRIPTOR.full_name.removeprefix("lbann_data.")
    found.add((name, "", 0))
    for field, value in message.ListFields():
        found.add((name, field.name, field.number))
        if field.message_type is None:
            continue
        for item in (value if field.is_repeated else [value]):
            if isinstance(item, any_pb2.Any):
                payload = getattr(lbann_pb2, item.TypeName().removeprefix("lbann_data."))()
                assert item.Unpack(payload), item.type_url
                emitted_fields(payload, found)
            else:
                emitted_fields(item, found)
    return found


def assert_fields_in_spec(message, version: str = "0.104") -> None:
    """Every field set in ``message`` exists, with that number, in LBANN ``version``'s own schema
    (0.103: v0.104's minus what §1 says came later)."""
    known = fields("develop" if version == "develop" else "0.104")
    for msg, field, number in emitted_fields(message):
        if msg.startswith("google.protobuf."):
            continue
        assert msg in known, f"message {msg} is not in LBANN {version}'s schema"
        if field:
            assert known[msg].get(field) == number, f"{msg}.{field} = {number} is not in LBANN {version}'s schema"
        if version == "0.103":
            assert (msg, field) not in SINCE, f"{msg}.{field} needs LBANN {SINCE[(msg, field)]}"


def onnx_outputs(model, feeds) -> list[np.ndarray]:
    return list(run_onnxruntime(model, feeds).values())


def roundtrip_vs_onnxruntime(model: onnx.ModelProto | str | Path, path: Path, rtol: float = 1e-5, atol: float = 1e-6,
                             strict: bool = True, **options) -> nnbridge.Graph:
    """ONNX → LBANN prototext → IR → ONNX; outputs of both ONNX models agree under onnxruntime.

    ``strict`` also runs protobuf's pure-Python strict parser over the whole file (slow for
    hundreds of thousands of inline values; nnbridge's reader is strict about everything else).
    """
    original = onnx.load(str(model)) if isinstance(model, (str, Path)) else model
    nnbridge.convert(original, path, **options)
    if strict:
        assert_fields_in_spec(strict_parse(path), options.get("lbann_version", "0.104"))
    graph = nnbridge.load(path)
    feeds = random_inputs(nnbridge.load(original), seed=0)
    want = onnx_outputs(original, feeds)
    exported = graph_to_model(graph)
    onnx.checker.check_model(exported)
    got = onnx_outputs(exported, {v.name: x for v, x in zip(graph.inputs, feeds.values())})
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * max(1.0, float(np.abs(w).max())))
    return graph


def read_experiment(path: Path) -> lbann_pb2.LbannPB:
    return text_format.Parse(path.read_text(), lbann_pb2.LbannPB())


def canonical(pb: lbann_pb2.LbannPB, rename: bool) -> lbann_pb2.LbannPB:
    """Without the data reader; layers renamed by position when ``rename`` (LBANN's frontend
    names unnamed layers 'layer<global count>'); set-ordered lists (weights, regularized weights) sorted."""
    out = lbann_pb2.LbannPB()
    out.CopyFrom(pb)
    out.ClearField("data_reader")
    names = {layer.name: (f"L{i}" if rename else layer.name) for i, layer in enumerate(pb.model.layer)}
    for layer in out.model.layer:
        layer.name = names[layer.name]
        for field in ("parents", "children"):
            renamed = [names[n] for n in getattr(layer, field)]
            layer.ClearField(field)
            getattr(layer, field).extend(renamed)
    for term in out.model.objective_function.layer_term:
        term.layer = names[term.layer]
    for metric in out.model.metric:
        metric.layer_metric.layer = names[metric.layer_metric.layer]
    for reg in out.model.objective_function.l2_weight_regularization:
        reg.weights.sort()
    weights = sorted(out.model.weights, key=lambda w: w.name)
    out.model.ClearField("weights")
    out.model.weights.extend(weights)
    return out


def verified_corpus(root: Path, part: str) -> Path:
    """``root/<part>`` of the committed LBANN corpus (written by tools/lbann_corpus.py), each of its
    files checked against the SHA-256 the corpus README lists (the provenance that came with them)."""
    listed = {}
    for line in (root / "README.md").read_text().splitlines():
        digest, _, name = line.partition("  ")
        if len(digest) == 64 and name.startswith(f"{part}/"):
            listed[name] = digest
    files = {str(p.relative_to(root)): p for p in (root / part).rglob("*") if p.is_file()}
    assert files and set(files) == set(listed), f"{root / part} and its README's list differ"
    for name, path in files.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == listed[name], f"{path} differs from its README"
    return root / part
