"""``nnbridge port`` on the whole matrix, and the time of one report for a ResNet-50-sized model.

1. Every real-architecture fixture (``tests/fixtures/architectures``, dynamic ones pinned to their
   example shapes) and onnx's nine light CNNs: each table is checked by ``bench/port_matrix.problems``
   (every cell filled; each command that writes a file writes the bytes port validated and that file
   agrees with onnxruntime exactly when the table says; refused targets' reasons are what ``convert``
   prints). ``make test`` checks the fixtures, SqueezeNet and LeNet-5 the same way (tests/test_port.py).
2. The whole report (four targets) for ResNet-50 (onnx's light_resnet50: the full architecture at
   224×224, 25.6 M parameters): wall and CPU time, printed, not asserted (issue #39: under a minute
   on 2 cores).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import nnbridge
from bench.port_matrix import cpu_seconds, problems
from nnbridge.zoo.corpus import LIGHT_MODELS, light_case

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "architectures"


def models() -> list[tuple[str, Path, dict | None]]:
    manifest = json.loads((FIXTURES / "manifest.json").read_text())
    out = []
    for name in sorted(manifest):
        declared = manifest[name]["inputs"]
        dynamic = any(not isinstance(d, int) or d < 1 for dims in declared.values() for d in dims)
        out.append((name, FIXTURES / f"{name}.onnx", manifest[name]["example_shapes"] if dynamic else None))
    out += [(f"light_{name}", light_case(name).model_path, None) for name in LIGHT_MODELS]
    return out


def matrix() -> bool:
    print("port on every fixture and light model: each table's commands run and checked against it")
    print(f"  {'model':24s} {'smaug-ref':>14s} {'smaug-smv':>14s} {'lbann':>14s} {'rdu':>14s} {'cpu s':>7s}  holds")
    held, total = 0, 0
    for name, path, shapes in models():
        with tempfile.TemporaryDirectory(prefix="nnbridge-bench-port-") as folder:
            start = cpu_seconds()
            report = nnbridge.port(str(path), input_shapes=shapes, out_dir=f"{folder}/out", keep=True)
            spent = cpu_seconds() - start
            found = problems(report, Path(folder) / "out")
        cells = [f"{t.conversion.status.replace('with rewrites', 'rewrites')}/{t.numerics.verdict}"
                 for t in report.targets]
        total += 1
        held += not found
        print(f"  {name:24s} " + " ".join(f"{c:>14s}" for c in cells) + f" {spent:7.1f}  "
              + ("yes" if not found else "NO"), flush=True)
        for problem in found:
            print(f"      {problem}")
    print(f"verdict: {held}/{total} tables hold (every cell filled, every command writes what port validated, "
          f"files agree with onnxruntime as the table says, refusals are convert's) — "
          + ("PASS" if held == total else "FAIL"))
    return held == total


def resnet50_time() -> None:
    path = light_case("resnet50").model_path
    with tempfile.TemporaryDirectory(prefix="nnbridge-bench-port-") as folder:
        start, cpu = time.perf_counter(), cpu_seconds()
        report = nnbridge.port(str(path), out_dir=f"{folder}/out")
        wall, cpu = time.perf_counter() - start, cpu_seconds() - cpu
    cells = ", ".join(f"{t.target} {t.conversion.status}/{t.numerics.verdict}" for t in report.targets)
    print(f"port light_resnet50 (ResNet-50, 224×224, four targets: {cells}): {wall:.1f} s wall, {cpu:.1f} s CPU "
          "(issue #39: under a minute on 2 cores; not asserted)\n")


def main() -> bool:
    """Returns True when a table does not hold."""
    resnet50_time()  # first: in a fresh process, as a user's run (the matrix warms caches)
    ok = matrix()
    return not ok
