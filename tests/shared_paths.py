"""Where the test data lives — ../shared next to the repository (or NNBRIDGE_SHARED_DATA) and
the models the onnx package ships: one home for the paths, imported by conftest and by tests
(``from conftest import`` is ambiguous: every test folder may have its own conftest)."""

from __future__ import annotations

import os
from pathlib import Path

import onnx

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("NNBRIDGE_SHARED_DATA", REPO.parent / "shared" / "data"))
SHARED_SPECS = SHARED_DATA.parent / "specs"
#: LBANN's own files (v0.99 models, unit-test experiments and lbann.models output), written by
#: tools/lbann_corpus.py and committed with their provenance and licence notice
LBANN_CORPUS = REPO / "tests" / "fixtures" / "lbann_corpus"
ONNX_DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
