"""Export the real-architecture test fixtures (``make fixtures``; needs the ``bench`` extra).

Small configurations of real architectures (``bench.architectures.FIXTURES``: HF transformers'
BERT, GPT-2 with and without past key values, T5, ViT, a LLaMA-style decoder with GQA, a Whisper
encoder; MobileNetV3, EfficientNet, ConvNeXt, RegNet and PoolFormer blocks in plain torch) with
seeded random weights, exported by ``torch.onnx.export`` to ``tests/fixtures/architectures``:
``<name>.onnx``, its example inputs ``<name>.npz`` and ``manifest.json`` (what each is, the versions
that wrote it). Nothing is downloaded.

    python -m tools.architecture_fixtures            # every fixture
    python -m tools.architecture_fixtures bert vit   # some
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "architectures"
MANIFEST = "manifest.json"
OPSET = 18


def _declared(value) -> list:
    """An input's dims as declared: an int, a name, or null for an unnamed dim."""
    dims = []
    for dim in value.type.tensor_type.shape.dim:
        dims.append(dim.dim_value if dim.HasField("dim_value") else (dim.dim_param or None))
    return dims


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="fixtures to export (default: all)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"directory (default: {OUT})")
    args = parser.parse_args(argv)

    import onnx
    import torch
    import transformers

    from bench.architectures import FIXTURES, export

    known = {arch.name: arch for arch in FIXTURES}
    unknown = [name for name in args.names if name not in known]
    if unknown:
        print(f"error: unknown fixture {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    warnings.filterwarnings("ignore")  # torch's tracer warnings about HF internals
    for arch in [known[name] for name in args.names] or FIXTURES:
        target, feeds = export(arch, args.out, OPSET, overwrite=True)
        model = onnx.load(str(target))
        onnx.checker.check_model(model)
        np.savez(args.out / f"{arch.name}.npz", **feeds)
        manifest[arch.name] = {
            "about": arch.about,
            "inputs": {value.name: _declared(value) for value in model.graph.input},
            "example_shapes": {name: list(array.shape) for name, array in feeds.items()},
            "nodes": len(model.graph.node),
            "bytes": target.stat().st_size,
            "opset": OPSET,
            "written_by": f"torch {torch.__version__}, transformers {transformers.__version__}, "
                          f"onnx {onnx.__version__}; seed 0",
        }
        print(f"{arch.name}: {len(model.graph.node)} nodes, {target.stat().st_size / 1024:.0f} kB")
    manifest_path.write_text(json.dumps(dict(sorted(manifest.items())), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
