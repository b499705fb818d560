"""The real SMAUG files of ../shared/data/smaug, checked against the data README's SHA-256."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from smaug_data import SHA256


@pytest.fixture(scope="session")
def smaug_dir(shared_data: Path) -> Path:
    root = shared_data / "smaug"
    for rel, digest in SHA256.items():
        actual = hashlib.sha256((root / rel).read_bytes()).hexdigest()
        assert actual == digest, f"{rel}: SHA-256 {actual} differs from the data README"
    return root
