"""The real-architecture fixtures (``tests/fixtures/architectures``, written by ``make fixtures``)
and what each target expresses among them, for the tests that run them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "architectures"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())
NAMES = sorted(MANIFEST)

#: the fixtures each target expresses; every other fixture must be refused
CONVERTS = {
    # 0.104 and develop: transformers (GPT-2's Conv1D rows, LayerNorm over the hidden axis, GQA's
    # repeated heads, RMSNorm's broadcasts) and CNN blocks through the decompositions table
    "lbann": set(NAMES),
    "lbann-develop": set(NAMES),
    # depthwise convolutions and squeeze-and-excite via Repeat/HardSwish decompositions; SMV
    # leaves depthwise outputs unwritten (quirk Q10), so only the Reference backend takes them
    "smaug-Reference": {"mobilenetv3", "mobilenetv3-dynamic", "efficientnet"},
    "smaug-SMV": set(),
}

SUFFIX = {"lbann": ".prototext", "lbann-develop": ".prototext", "smaug-Reference": "_topo.pbtxt",
          "smaug-SMV": "_topo.pbtxt"}


def load(name: str) -> tuple[Path, dict[str, np.ndarray]]:
    with np.load(FIXTURES / f"{name}.npz") as data:
        return FIXTURES / f"{name}.onnx", {k: data[k] for k in data.files}
