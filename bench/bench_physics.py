"""The simulators' physics property tests (every ``tests/*/test_*physics*.py``: SMV per layer and
over the generated graph families, RDU) over more generated cases than ``make test`` runs: 3,000
per property instead of 500 (hypothesis, derandomised, so a failure reproduces). Prints one
verdict line per property (test) and a last line for all. Set NNBRIDGE_PROPERTY_CASES for another
count.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

CASES = os.environ.get("NNBRIDGE_PROPERTY_CASES", "3000")
ROOT = Path(__file__).resolve().parent.parent


def physics_tests() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("tests/*/test_*physics*.py"))


def verdicts(junit: Path) -> list[tuple[str, str]]:
    """(property, verdict) per test case of a pytest JUnit report: 'holds', or 'FAILS: ' and the
    first line of the failure (hypothesis's falsifying example is in the run's output above)."""
    found = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        broken = case.find("failure") if case.find("failure") is not None else case.find("error")
        if broken is not None:
            found.append((name, "FAILS: " + (broken.get("message") or "").splitlines()[0][:200]))
        elif case.find("skipped") is not None:
            kind = "xfail" if "xfail" in (case.find("skipped").get("type") or "") else "skipped"
            found.append((name, f"{kind}: {(case.find('skipped').get('message') or '')[:200]}"))
        else:
            found.append((name, f"holds ({float(case.get('time', 0)):.0f} s)"))
    return found


def main() -> int:
    env = {**os.environ, "NNBRIDGE_PROPERTY_CASES": CASES}
    tests = physics_tests()
    print(f"physics property tests, {CASES} generated cases per property: {', '.join(tests)}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "physics.xml"
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                               f"--junitxml={junit}", *tests], cwd=ROOT, env=env)
        lines = sorted(verdicts(junit)) if junit.exists() else []
    for name, verdict in lines:
        print(f"physics: {name}: {verdict}", flush=True)
    verdict = "every property holds" if done.returncode == 0 and lines else "a property FAILS (see above)"
    print(f"physics: {verdict} over {CASES} generated cases per property (SMV and RDU)", flush=True)
    return done.returncode or not lines


if __name__ == "__main__":
    raise SystemExit(main())
