"""``make demo``: the main job end to end on a model the repository builds.

LeNet-5 (SMAUG's variant, from ``nnbridge.zoo``) goes ONNX → SMAUG → LBANN →
ONNX; the round-tripped model then runs on the reference, SMV and RDU backends,
and every result is cross-checked against onnxruntime running the *original*
ONNX model on the same input.

    python -m nnbridge.apps.demo [--model lenet5] [--out out/demo]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from rich.console import Console
from rich.table import Table
from rich.text import Text

import nnbridge
from nnbridge import zoo
from nnbridge.api.inputs import random_inputs
from nnbridge.base.errors import NNBridgeError
from nnbridge.check import compare, model_precision, rule_for, run_onnxruntime
from nnbridge.ir.stats import parameters

console = Console(highlight=False, markup=False, width=120)  # messages print verbatim


def _convert_chain(model: onnx.ModelProto, out: Path, name: str) -> tuple[list[list[Any]], Path]:
    """ONNX → SMAUG → LBANN → ONNX; returns table rows and the final ONNX path. Each row counts the
    file it wrote, read back, as ``nnbridge summary`` and ``convert`` count (``ir.stats``)."""
    src = out / f"{name}.onnx"
    onnx.save(model, src)
    input_shape = tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)
    # LBANN files hold per-sample shapes: reading one back needs the input's
    reading = {out / f"{name}.prototext": {"input_shapes": {"input": input_shape[1:]}}}
    chain = [
        # SMAUG's Reference backend keeps fp32 weights, so the chain itself is lossless;
        # fp16 is what the SMV simulator below adds.
        (src, out / f"{name}_topo.pbtxt", {"smaug_backend": "Reference"}),
        (out / f"{name}_topo.pbtxt", out / f"{name}.prototext", {}),
        (out / f"{name}.prototext", out / f"{name}_roundtrip.onnx", reading[out / f"{name}.prototext"]),
    ]
    source = nnbridge.load(src)
    rows = [["zoo", src.name, str(len(source)), f"{parameters(source)[0]:,}", ""]]
    for a, b, options in chain:
        start = time.perf_counter()
        nnbridge.convert(a, b, **options)
        elapsed = time.perf_counter() - start
        written = nnbridge.load(b, **reading.get(b, {}))
        rows.append([a.name, b.name, str(len(written)), f"{parameters(written)[0]:,}", f"{elapsed * 1e3:.0f} ms"])
    return rows, chain[-1][1]


def _backend_rows(original: onnx.ModelProto, final: Path) -> tuple[list[list[str | Text]], bool]:
    from nnbridge.backends import get_backend

    graph = nnbridge.load(original)
    feeds = random_inputs(graph)
    expected = run_onnxruntime(original, feeds)
    (want,) = expected.values()
    rows, ok = [], True
    final_graph = nnbridge.load(final)
    final_feeds = {v.name: x for v, x in zip(final_graph.inputs, feeds.values())}
    ort_roundtrip = list(run_onnxruntime(onnx.load(final), final_feeds).values())[0]
    rule = rule_for(model_precision(graph), None)
    check = compare("output", ort_roundtrip, want, rule)
    ok &= check.ok
    rows.append(["onnxruntime (round-tripped file)", *_figures(check), rule.name, _verdict(check.ok),
                 "format fidelity"])
    for backend in ("reference", "smv", "rdu"):
        try:
            start = time.perf_counter()
            exe = nnbridge.compile(final_graph, backend=backend)
            got = list(exe.run(final_feeds).values())[0]
            seconds = time.perf_counter() - start
            rule = rule_for(model_precision(graph), get_backend(backend).precision)
            check = compare("output", got, want, rule)
            ok &= check.ok
            rows.append([backend, *_figures(check), rule.name, _verdict(check.ok), _perf_note(exe.report, seconds)])
        except NNBridgeError as exc:
            ok = False
            rows.append([backend, "", "", "", "", Text("failed", "red"), str(exc)[:90]])
    return rows, ok


def _figures(check: Any) -> list[str]:
    """max abs error, error relative to the output's scale, elements outside the rule."""
    return [f"{check.max_abs_err:.2e}", f"{check.err_vs_scale:.2e}", str(check.outside)]


def _verdict(ok: bool) -> Text:
    return Text("agree", "green") if ok else Text("DIFFER", "red")


def _perf_note(report: Any, seconds: float) -> str:
    totals = getattr(report, "totals", {}) or {}
    shown = [f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in list(totals.items())[:2]]
    return ", ".join(shown) or f"{seconds * 1e3:.0f} ms"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="lenet5", choices=zoo.names(), help="zoo model (default lenet5)")
    parser.add_argument("--out", default="out/demo", help="where the converted files go")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    np.seterr(all="ignore")
    model = zoo.build(args.model)
    onnx.save(zoo.build("digits_cnn", batch=32), out / "digits_cnn.onnx")  # the training tour's model
    console.rule(f"nnbridge demo: {args.model} — {zoo.describe(args.model)}")
    try:
        conv_rows, final = _convert_chain(model, out, args.model)
    except NNBridgeError as exc:
        console.print(Text.assemble(("conversion failed:", "red"), f" {exc}"))
        return 1
    table = Table(title="1. convert ONNX → SMAUG → LBANN → ONNX (counts: of the file written)")
    for col in ("from", "to", "nodes", "parameters", "time"):
        table.add_column(col)
    for row in conv_rows:
        table.add_row(*row)
    console.print(table)
    rows, ok = _backend_rows(model, final)
    table = Table(title="2. run the round-tripped model; cross-check against onnxruntime on the original")
    for col in ("runs on", "max abs err", "err/scale", "outside", "rule", "verdict", "notes"):
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    console.print(table)
    console.print("rules: the verdict table of docs/check.md (fp32, fp16 SMV, bf16 RDU), chosen from the model's "
                  "and the backend's precision")
    console.print(f"files in {out}/ — try: nnbridge summary {out}/{args.model}_topo.pbtxt")
    console.print(Text("all backends agree with onnxruntime", "green") if ok else Text("some checks failed", "red"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
