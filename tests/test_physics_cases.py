"""The physics tests' case counting (tests/physics_cases.py) catches a property judged on fewer
cases than the budget, and a violation, rather than passing on what it did not judge."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from tests.physics_cases import assert_every_property_judged, tally


def half_judged(drawing: int, cfg: dict) -> dict[str, bool]:
    """``always`` on every case; ``sometimes`` only where the drawing is even (a setting only some
    machines have)."""
    return {"always": True, **({"sometimes": True} if drawing % 2 == 0 else {})}


def test_a_property_judged_on_fewer_cases_fails():
    found = tally(st.integers(0, 10**6), st.just({}), half_judged, cases=40)
    assert found.judged == 40 and found.cases["always"] == 40 and 0 < found.cases["sometimes"] < 40
    with pytest.raises(AssertionError, match="fewer than 40 cases.*sometimes"):
        assert_every_property_judged(found, "toy", 40)


def test_a_violation_fails_and_every_one_is_counted_without_stopping():
    def judge(drawing, cfg):
        return {"small": drawing < 100}

    with pytest.raises(AssertionError):
        tally(st.integers(0, 10**6), st.just({}), judge, cases=40)
    found = tally(st.integers(0, 10**6), st.just({}), judge, cases=40, stop_at_first=False)
    assert found.broken["small"] > 0 and found.violations() == found.broken["small"]
