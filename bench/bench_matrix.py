"""The heavy test matrices in full: ``make test`` keeps one representative per family of each
(a model per verdict kind, an LLM size per socket regime, …); the other cases are marked
``matrix`` and run here, with the same assertions (``pytest --full-matrix -m matrix``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    print("test matrices beyond make test's representatives (pytest --full-matrix -m matrix):", flush=True)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--full-matrix",
                           "-m", "matrix", "tests"], cwd=root, capture_output=True, text=True)
    sys.stdout.write(done.stdout[-4000:])
    counts = dict((kind, int(n)) for n, kind in re.findall(r"(\d+) (passed|failed|error|errors)\b", done.stdout))
    verdict = "every case passes" if done.returncode == 0 else "a case FAILS (see above)"
    print(f"matrix: {verdict}: {counts.get('passed', 0)} passed, {counts.get('failed', 0)} failed "
          f"beyond make test's representatives", flush=True)
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
