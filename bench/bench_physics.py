"""The simulators' physics properties over more generated cases than ``make test`` runs: 3,000
graphs × machines instead of 500 (hypothesis, derandomised, so a failure reproduces), judged by
the property tests' own ``judge`` (tests/smv/test_smv_physics.py, tests/rdu/test_rdu_physics.py)
and counted by their ``tally`` (tests/physics_cases.py) without stopping at the first violation.
Prints one line per property — its violations, the first violating case and the cases it was
judged on — and fails when a property has a violation or fewer than 3,000 cases; then the overall
line. Set NNBRIDGE_PROPERTY_CASES for another count.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

CASES = int(os.environ.get("NNBRIDGE_PROPERTY_CASES", "3000"))
ROOT = Path(__file__).resolve().parent.parent


def simulators() -> dict[str, tuple]:
    """Per simulator: its property module's graph strategy, machine strategy and judge."""
    sys.path.insert(0, str(ROOT))
    from tests.rdu import test_rdu_physics as rdu
    from tests.smv import test_smv_physics as smv

    return {"SMV": (smv.CASE_GRAPHS, smv.configs, smv.judge), "RDU": (rdu.CASE_GRAPHS, rdu.machines(), rdu.judge),
            "RDU off-chip tiers": (rdu.CASE_GRAPHS, rdu.tiered(), rdu.judge_tiers)}


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from tests.physics_cases import tally

    failed = short = 0
    for simulator, (graphs, machines, judge) in simulators().items():
        found = tally(graphs, machines, judge, CASES, stop_at_first=False)
        for line in found.lines(simulator):
            print(line, flush=True)
        failed += found.violations()
        for name, n in found.short_of(CASES).items():
            print(f"physics {simulator}: {name}: judged on {n} cases, fewer than {CASES}", flush=True)
            short += 1
    verdict = "every property holds" if not failed else f"{failed} violations (see above)"
    counted = "each judged on every case" if not short else f"{short} properties judged on fewer cases"
    print(f"physics: {verdict} over {CASES} generated cases per simulator (SMV, RDU, and RDU's off-chip tiers on "
          f"every preset that has them), {counted}", flush=True)
    return bool(failed or short)


if __name__ == "__main__":
    raise SystemExit(main())
