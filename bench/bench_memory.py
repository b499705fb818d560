"""Peak memory of conversions on a VGG-19-sized model (issue 17: ≤ 2× the model's size).

A VGG-19 (ImageNet configuration E, 143.7 M float32 parameters, random weights) is built here
with the zoo's builder — nothing is downloaded or committed — and each conversion runs as
``nnbridge convert`` in a fresh process whose own peak resident memory (``VmHWM``) is read at
its exit: ONNX → LBANN (prototext + ``.npy`` weights) → ONNX, and ONNX → SMAUG.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 2.0  # peak RSS / model size

#: VGG-19: output channels of the 3×3 convolutions, "M" for a 2×2 max pool
VGG19 = [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"]

#: the child: runs the CLI, then reports its own peak RSS on the last line of stderr
CHILD = """
import re, runpy, sys
sys.argv = ["nnbridge", *sys.argv[1:]]
try:
    runpy.run_module("nnbridge", run_name="__main__")
    code = 0
except SystemExit as stop:
    code = stop.code
peak = re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1)
sys.stderr.write(f"\\nVmHWM {peak}\\n")
sys.exit(code)
"""


def vgg19(path: Path) -> int:
    """Writes VGG-19 to ``path``; returns its size in bytes."""
    import onnx

    from nnbridge.zoo import OnnxBuilder

    b = OnnxBuilder("vgg19", seed=0)
    x, channels = b.input("image", [1, 3, 224, 224]), 3
    for i, layer in enumerate(VGG19):
        if layer == "M":
            x = b.maxpool(x, hint=f"pool{i}")
        else:
            x = b.op("Relu", [b.conv(x, channels, layer, 3, hint=f"conv{i}")])
            channels = layer
    x = b.op("Flatten", [x], axis=1)
    for i, (n_in, n_out) in enumerate(((512 * 7 * 7, 4096), (4096, 4096), (4096, 1000))):
        x = b.dense(x, n_in, n_out, hint=f"fc{i}")
        if i < 2:
            x = b.op("Relu", [x])
    b.output(x)
    onnx.save(b.model(), str(path))
    return path.stat().st_size


def convert(src: Path, dst: Path, *options: str) -> tuple[float, float]:
    """(seconds, peak RSS in bytes) of ``nnbridge convert src dst`` in a fresh process."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, "convert", str(src), str(dst), *options],
                          capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"nnbridge convert {src.name} {dst.name} failed: {done.stderr.strip()}")
    return seconds, int(done.stderr.split()[-1]) * 1024


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="nnbridge-bench-memory-") as tmp:
        work = Path(tmp)
        size = vgg19(work / "vgg19.onnx")
        print(f"VGG-19, {size / 2**20:.0f} MiB ONNX; peak RSS of each conversion in a fresh process "
              f"(target ≤ {TARGET:.0f}× the model size)")
        steps: list[tuple] = [
                 ("ONNX → LBANN (.npy weights)", work / "vgg19.onnx", work / "lbann" / "vgg19.prototext"),
                 ("LBANN → ONNX", work / "lbann" / "vgg19.prototext", work / "back.onnx"),
                 ("ONNX → SMAUG (Reference)", work / "vgg19.onnx", work / "smaug" / "vgg19_topo.pbtxt",
                  "--smaug-backend", "Reference")]
        ok = True
        for label, src, dst, *options in steps:
            dst.parent.mkdir(exist_ok=True)
            seconds, peak = convert(src, dst, *options)
            ratio = peak / size
            ok &= ratio <= TARGET
            print(f"  {label:30s} {seconds:6.1f} s  peak RSS {peak / 2**20:7.0f} MiB  {ratio:4.2f}× the model  "
                  f"{'met' if ratio <= TARGET else 'NOT met'}", flush=True)
        os.sync()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
