"""Fixtures of the check tests: faults injected on the backend side only."""

from __future__ import annotations

import numpy as np
import pytest

import nnbridge


@pytest.fixture
def faulty_weight(monkeypatch):
    """Scale one weight by 5 % on the backend side only.

    ``nnbridge.api.compiler.compile`` is the entry every backend run of ``check`` goes through (the
    layerwise run included); onnxruntime keeps reading the original model, so the backend
    really computes a different function in that one layer, as a broken kernel would.
    """
    real = nnbridge.api.compiler.compile

    def inject(weight: str, factor: float = 1.05) -> None:
        def compile_with_fault(model, backend="reference", **options):
            graph = nnbridge.load(model).copy()
            graph.initializers[weight] = graph.initializers[weight] * np.float32(factor)
            return real(graph, backend=backend, **options)

        monkeypatch.setattr(nnbridge.api.compiler, "compile", compile_with_fault)

    return inject
