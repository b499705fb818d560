"""The simulators' physics properties over more generated cases than ``make test`` runs: 3,000
graphs × machines instead of 500 (hypothesis, derandomised, so a failure reproduces), judged by
the property tests' own ``judge`` (tests/smv/test_smv_physics.py, tests/rdu/test_rdu_physics.py)
without stopping at the first violation. Prints one verdict line per property — its violations
and the first violating case — then the overall line. Set NNBRIDGE_PROPERTY_CASES for another
count.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CASES = int(os.environ.get("NNBRIDGE_PROPERTY_CASES", "3000"))
ROOT = Path(__file__).resolve().parent.parent
#: every physical bound of a case's compiles (time ≥ FLOPs / peak and ≥ bytes / bandwidth of every
#: tier, utilisations ≤ 100 %, capacities), which the judges report by name only when broken
BOUNDS = "bounds: every bound of every compile"


def simulators() -> dict[str, tuple]:
    """Per simulator: its property module's graph strategy, machine strategy and judge."""
    sys.path.insert(0, str(ROOT))
    from tests.rdu import test_rdu_physics as rdu
    from tests.smv import test_smv_physics as smv

    return {"SMV": (smv.CASE_GRAPHS, smv.configs, smv.judge), "RDU": (rdu.CASE_GRAPHS, rdu.machines(), rdu.judge),
            "RDU off-chip tiers": (rdu.CASE_GRAPHS, rdu.tiered(), rdu.judge_tiers)}


def tally(graphs: st.SearchStrategy, machines: st.SearchStrategy, judge) -> tuple[int, Counter, dict, Counter]:
    """Cases judged, and per property the cases it was judged on, its violations and the first."""
    judged, cases, broken, first = [0], Counter(), Counter(), {}

    @settings(max_examples=CASES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(graphs, machines)
    def run(drawing, cfg):
        verdicts = judge(drawing, cfg)
        if verdicts is None:  # no case (SMAUG's tiler refuses a layer on this configuration)
            return
        judged[0] += 1
        cases[BOUNDS] += 1  # a judge names a bound only when it breaks
        for name, holds in verdicts.items():
            cases[name] += 1
            if not holds:
                broken[name] += 1
                first.setdefault(name, (drawing, cfg))

    run()
    return judged[0], cases, first, broken


def main() -> int:
    failed = 0
    for simulator, (graphs, machines, judge) in simulators().items():
        judged, cases, first, broken = tally(graphs, machines, judge)
        print(f"physics {simulator}: {judged} generated graphs × machines judged", flush=True)
        if any(name.startswith("bounds: ") for name in broken):
            broken[BOUNDS] = sum(n for name, n in broken.items() if name.startswith("bounds: "))
            first[BOUNDS] = "the bounds named below"
        for name in sorted(cases):
            verdict = "holds" if not broken[name] else f"FAILS {broken[name]} times, first {first[name]}"
            print(f"physics {simulator}: {name}: {verdict} ({cases[name]} cases)", flush=True)
        failed += sum(n for name, n in broken.items() if name != BOUNDS)
    verdict = "every property holds" if not failed else f"{failed} violations (see above)"
    print(f"physics: {verdict} over {CASES} generated cases per simulator (SMV, RDU, and RDU's off-chip tiers on "
          f"every preset that has them)", flush=True)
    return bool(failed)


if __name__ == "__main__":
    raise SystemExit(main())
