"""The compiled kernels (numba, ``nnbridge/kernels/compiled``) against the numpy kernels they stand
in for, which stay the reference: bit for bit where both add the same terms in the same order,
otherwise within a bound stated and justified here; and the numpy fallback when numba is off.

Shapes are few and small: each distinct argument type compiles once per process (the compiled
code is cached on disk, but the first test process of a fresh machine pays for compiling)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nnbridge.kernels import compiled

U = 2.0**-24  # float32's unit roundoff

pytestmark = pytest.mark.skipif(compiled.load("curves") is None, reason="numba is not available")


# -- the float32 curves every compiled module shares ------------------------------------------

def _sweep() -> np.ndarray:
    """Every 1021st float32 up to 100 in magnitude (subnormals included), both signs, and the
    edges of the ranges."""
    bits = np.arange(0, np.float32(100).view(np.int32), 1021, dtype=np.int32)
    positive = bits.view(np.float32)
    edges = np.float32([88.7, 88.72, 88.7228, 88.72284, 88.7229, 88.8, 89.0, 89.1, -87.3, -88.0, -103.9, -104.5,
                        1e30, -1e30])
    return np.concatenate([positive, -positive, edges])


def _ulps(actual: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """Distance in float32 ulps of the exact value (subnormal results in ulps of the smallest normal)."""
    spacing = np.spacing(np.abs(exact).astype(np.float32)).clip(np.finfo(np.float32).tiny)
    return np.abs(actual.astype(np.float64) - exact) / spacing.astype(np.float64)


@pytest.mark.parametrize(("name", "exact", "bound"), [
    ("exp32", np.exp, 1.5),
    ("expm1_32", np.expm1, 2.5),
    ("tanh32", np.tanh, 3.5),
    ("sigmoid32", lambda x: 1 / (1 + np.exp(-x)), 3.0),
])
def test_compiled_curves_are_within_their_stated_ulps_of_float64(name, exact, bound):
    """The bounds of compiled/_core.py's docstring (measured there on a denser sweep) with a
    margin; where float64's result is beyond float32's range the curve must overflow to ±inf or
    flush to zero like numpy's; NaN, ±0 and ±inf come through as numpy's float32 curves give them."""
    curves = compiled.load("curves")
    x = _sweep()
    with np.errstate(over="ignore"):
        want = exact(x.astype(np.float64))
    got = curves.apply(name, x)
    finite = np.abs(want) < float(np.finfo(np.float32).max)
    assert _ulps(got[finite], want[finite]).max() <= bound
    assert np.all(np.isinf(got[~finite]) & (np.sign(got[~finite]) == np.sign(want[~finite])))
    special = np.float32([np.nan, np.inf, -np.inf, 0.0, -0.0])
    reference = {"exp32": np.exp, "expm1_32": np.expm1, "tanh32": np.tanh,
                 "sigmoid32": lambda v: np.float32(1) / (np.float32(1) + np.exp(-v))}[name](special)
    np.testing.assert_array_equal(curves.apply(name, special), reference)
    assert np.array_equal(np.signbit(curves.apply(name, special)), np.signbit(reference))


# -- the switch, the fallback and the cache ----------------------------------------------------

def test_nnbridge_no_numba_runs_the_numpy_kernels_and_says_so(monkeypatch):
    monkeypatch.setenv(compiled.DISABLE, "1")
    assert compiled.load("curves") is None
    assert compiled.describe() == f"numpy kernels only ({compiled.DISABLE} is set)"
    monkeypatch.setenv(compiled.DISABLE, "0")
    assert compiled.load("curves") is not None
    assert compiled.describe().startswith("numba ")


def test_compiled_code_is_cached_in_the_per_user_directory(tmp_path):
    """A fresh process with an empty cache home compiles a kernel and leaves it there, outside the
    installed package (so a read-only install caches too), in a directory named by a hash of the
    compiled modules' sources (numba would not notice a change to a helper in another module);
    NUMBA_CACHE_DIR, numba's own setting, wins over the home."""
    code = ("import numpy as np\n"
            "from nnbridge.kernels import compiled\n"
            "curves = compiled.load('curves')\n"
            "curves.apply('exp32', np.zeros(4, np.float32))\n"
            "print(compiled.cache_dir())\n")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", compiled.DISABLE)}
    env["XDG_CACHE_HOME"] = str(tmp_path / "home")
    root = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = str(root)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=root)
    where = Path(done.stdout.strip())
    assert where.parent == tmp_path / "home" / "nnbridge" / "numba"  # then a hash of the compiled modules
    assert any(where.rglob("*.nbi")) and any(where.rglob("*.nbc"))
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "own")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=root)
    assert Path(done.stdout.strip()).parent == tmp_path / "own" and any((tmp_path / "own").rglob("*.nbi"))
