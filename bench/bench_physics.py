"""The simulators' physics property tests (tests/smv/test_smv_physics.py, tests/rdu/test_rdu_physics.py)
over more generated cases than ``make test`` runs: 3,000 per property instead of 500 (hypothesis,
derandomised, so a failure reproduces). Set NNBRIDGE_PROPERTY_CASES for another count.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CASES = os.environ.get("NNBRIDGE_PROPERTY_CASES", "3000")
TESTS = ["tests/smv/test_smv_physics.py", "tests/rdu/test_rdu_physics.py"]


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "NNBRIDGE_PROPERTY_CASES": CASES}
    print(f"physics property tests, {CASES} generated cases per property:", flush=True)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", *TESTS],
                          cwd=root, env=env)
    verdict = "every property holds" if done.returncode == 0 else "a property FAILS (see above)"
    print(f"physics: {verdict} over {CASES} generated cases per property (SMV and RDU)", flush=True)
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
