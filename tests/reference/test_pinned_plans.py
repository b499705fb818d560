"""A dynamic model's runs get a plan pinned to input shapes they keep bringing (the reference
backend's ``plan_for``): the same outputs as the general plan, fewer steps (counting work, never
timing it), the general plan for shapes seen once, and right answers from threads sharing it."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from architecture_fixtures import load

import nnbridge
from nnbridge.backends.reference import backend as reference


def _feeds(name: str) -> dict[str, np.ndarray]:
    return load(name)[1]


def _general(exe, feeds) -> list[np.ndarray]:
    given = {k: v for k, v in feeds.items() if k in exe.input_names}
    return exe.plan.execute(given)


def _check_same(exe, feeds) -> None:
    got = exe.run(feeds)
    for name, want in zip(exe.output_names, _general(exe, feeds)):
        np.testing.assert_allclose(got[name], want, rtol=1e-6, atol=1e-6)


def _prepared(plan) -> float:
    """The share of a plan's steps that run a prepared callable."""
    return sum(step.prepared is not None for step in plan.steps) / len(plan.steps)


@pytest.mark.parametrize("name, fewer_than", [("bert-dynamic", 60), ("mobilenetv3-dynamic", 34)])
def test_recurring_shapes_run_a_pinned_plan_with_the_same_outputs(name, fewer_than):
    """Pinned, BERT's shape arithmetic folds away (96 steps → 50) and more of the steps left, static
    now, are prepared (MobileNetV3's convolutions)."""
    exe = nnbridge.compile(str(load(name)[0]), backend="reference")
    feeds = _feeds(name)
    assert exe.plan_for(feeds)[0] is exe.plan  # seen once: the general plan
    _check_same(exe, feeds)
    pinned, rows = exe.plan_for(feeds)  # seen again: pinned to its shapes
    assert pinned is not exe.plan and len(pinned.steps) < fewer_than <= len(exe.plan.steps) + 1
    assert _prepared(pinned) > _prepared(exe.plan)
    assert len(rows) == len(pinned.steps)
    _check_same(exe, feeds)
    assert len(exe.report.rows) == len(pinned.steps)


def test_each_recurring_shape_gets_its_own_plan_up_to_the_limit():
    exe = nnbridge.compile(str(load("bert-dynamic")[0]), backend="reference")
    rng = np.random.default_rng(0)
    shapes = [(1, n) for n in range(4, 4 + reference.MAX_SPECIALIZED + 2)]
    for shape in shapes * 2:
        _check_same(exe, {"input_ids": rng.integers(0, 128, shape, dtype=np.int64)})
    plans = [exe.plan_for({"input_ids": np.zeros(shape, np.int64)})[0] for shape in shapes]
    assert sum(plan is not exe.plan for plan in plans) == reference.MAX_SPECIALIZED
    assert len({id(plan) for plan in plans if plan is not exe.plan}) == reference.MAX_SPECIALIZED


def test_threads_sharing_a_dynamic_model_get_right_answers_while_plans_are_pinned():
    exe = nnbridge.compile(str(load("bert-dynamic")[0]), backend="reference")
    rng = np.random.default_rng(1)
    cases = [{"input_ids": rng.integers(0, 128, (b, n), dtype=np.int64)} for b, n in [(1, 16), (2, 8), (1, 5)]]
    wants = [_general(exe, feeds) for feeds in cases]
    failures: list[str] = []

    def work(seed: int) -> None:
        for i in range(12):
            k = (seed + i) % len(cases)
            got = exe.run(cases[k])
            for name, want in zip(exe.output_names, wants[k]):
                if not np.allclose(got[name], want, rtol=1e-6, atol=1e-6):
                    failures.append(f"thread {seed}, case {k}, output {name}")

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
