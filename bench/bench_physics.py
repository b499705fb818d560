"""The simulators' physics properties (tests/smv/test_smv_physics.py, tests/rdu/test_rdu_physics.py)
over more generated cases than ``make test`` runs: 3,000 per property instead of 500 (hypothesis,
derandomised, so a case reproduces). Unlike the tests, which stop at the first broken case, this
judges every case and prints one verdict line per simulator and property: the cases judged and
the violations. Set NNBRIDGE_PROPERTY_CASES for another count.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable

from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from tests.rdu import test_rdu_physics as rdu
from tests.smv import test_smv_physics as smv

CASES = int(os.environ.get("NNBRIDGE_PROPERTY_CASES", "3000"))


def _count(name: str, cases: st.SearchStrategy, configs: st.SearchStrategy,
           judge: Callable[[tuple, dict], dict[str, bool] | None]) -> int:
    """Judge ``CASES`` drawn cases, print a verdict per property; the number of violations."""
    judged: Counter[str] = Counter()
    broken: Counter[str] = Counter()
    first: dict[str, tuple] = {}

    @settings(max_examples=CASES, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck),
              database=None)
    @given(cases, configs)
    def run(drawing: tuple, cfg: dict) -> None:
        verdicts = judge(drawing, cfg)
        if verdicts is None:
            reject()
        for prop, holds in verdicts.items():
            judged[prop] += 1
            if not holds:
                broken[prop] += 1
                first.setdefault(prop, (drawing, cfg))

    run()
    for prop in sorted(judged):
        verdict = "holds" if not broken[prop] else f"FAILS, first {first[prop]}"
        print(f"physics {name}: {prop}: {broken[prop]} violations in {judged[prop]} cases — {verdict}", flush=True)
    return sum(broken.values())


def main() -> int:
    print(f"physics property cases over the graph families, {CASES} per property:", flush=True)
    violations = _count("rdu", rdu.CASE_GRAPHS, rdu.machines(), rdu.judge)
    violations += _count("smv", smv.CASE_GRAPHS, smv.configs, smv.judge)
    print(f"physics: {'every property holds' if not violations else f'{violations} violations'} "
          f"over {CASES} generated cases per property (SMV and RDU)", flush=True)
    return 1 if violations else 0


if __name__ == "__main__":
    raise SystemExit(main())
