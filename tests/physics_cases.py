"""One home for running a simulator's physics properties over generated cases (hypothesis,
derandomised) and counting, per property, the cases it was judged on — so "500 cases per
property" is checked, not assumed: a property a case could not judge (a setting the drawn machine
lacks, a batch SMAUG cannot tile) would otherwise get fewer. The property tests
(tests/smv/test_smv_physics.py, tests/rdu/test_rdu_physics.py) stop at the first violation, which
hypothesis then shrinks, and assert every property's count; bench/bench_physics.py counts every
violation over 3,000 cases and prints the counts."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

#: cases per property: 500 in make test; bench/bench_physics.py runs 3,000 (NNBRIDGE_PROPERTY_CASES sets either)
CASES = int(os.environ.get("NNBRIDGE_PROPERTY_CASES", 500))
#: every physical bound of a case's compiles (time ≥ FLOPs / peak and ≥ bytes / bandwidth of every tier,
#: utilisations ≤ 100 %, capacities); a judge names each as ``bounds: NAME``
BOUNDS = "bounds: every bound of every compile"

#: a judge: every property's verdict on one (drawn graph, drawn machine), by name; None when the
#: drawing is no case (hypothesis draws another in its place)
Judge = Callable[[tuple, dict], dict[str, bool] | None]


@dataclass
class Tally:
    """Cases judged, per property the cases it was judged on and its violations, and the first
    violating case of each."""

    judged: int = 0
    cases: Counter = field(default_factory=Counter)
    broken: Counter = field(default_factory=Counter)
    first: dict = field(default_factory=dict)

    def short_of(self, wanted: int) -> dict[str, int]:
        """The properties judged on fewer than ``wanted`` cases, with their counts."""
        return {name: n for name, n in sorted(self.cases.items()) if n < wanted}

    def lines(self, simulator: str) -> list[str]:
        """One line per property: its verdict and the cases it was judged on."""
        out = [f"physics {simulator}: {self.judged} generated graphs × machines judged"]
        for name in sorted(self.cases):
            n = self.broken[name]
            verdict = "holds" if not n else f"FAILS {n} times, first {self.first[name]}"
            out.append(f"physics {simulator}: {name}: {verdict} ({self.cases[name]} cases)")
        return out

    def violations(self) -> int:
        return sum(n for name, n in self.broken.items() if name != BOUNDS)


def tally(graphs: st.SearchStrategy, machines: st.SearchStrategy, judge: Judge, cases: int = CASES,
          stop_at_first: bool = True) -> Tally:
    """Judge ``cases`` generated (graph, machine) cases and count them per property. With
    ``stop_at_first`` the first violation fails (hypothesis shrinks it to a smallest case);
    without, every violation is counted."""
    found = Tally()

    @settings(max_examples=cases, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(graphs, machines)
    def run(drawing, cfg):
        verdicts = judge(drawing, cfg)
        if verdicts is None:
            reject()
        broken = sorted(name for name, holds in verdicts.items() if not holds)
        assert not (stop_at_first and broken), (drawing, cfg, broken)
        found.judged += 1
        found.cases[BOUNDS] += 1
        for name, holds in verdicts.items():
            found.cases[name] += 1
            if not holds:
                found.broken[name] += 1
                found.first.setdefault(name, (drawing, cfg))
        if any(name.startswith("bounds: ") for name in broken):
            found.broken[BOUNDS] += 1
            found.first.setdefault(BOUNDS, (drawing, cfg))

    run()
    return found


def assert_every_property_judged(found: Tally, simulator: str, cases: int = CASES) -> None:
    """Print each property's case count and fail when one was judged on fewer than ``cases``."""
    print("\n".join(found.lines(simulator)))
    short = found.short_of(cases)
    assert not short, f"{simulator}: properties judged on fewer than {cases} cases: {short}"
