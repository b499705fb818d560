"""Shared fixtures: where the test data lives (onnx's shipped data, ../shared/data)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from shared_paths import ONNX_DATA, SHARED_DATA


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"shared data not found at {SHARED_DATA} (set NNBRIDGE_SHARED_DATA)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def onnx_data() -> Path:
    return ONNX_DATA


@pytest.fixture
def cli(capsys):
    """Run the nnbridge command in-process: ``code, text = cli("run", path)``."""
    from nnbridge.cli import main

    def run(*argv) -> tuple[int, str]:
        code = main([str(a) for a in argv])
        captured = capsys.readouterr()
        return code, captured.out + captured.err

    return run


@pytest.fixture
def chromium() -> str:
    """A headless browser for the HTML reports' tests (Debian package chromium)."""
    found = next((p for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
                  if os.path.exists(p)), None)
    if found is None:
        pytest.skip("needs a headless Chromium (Debian package chromium)")
    return found
