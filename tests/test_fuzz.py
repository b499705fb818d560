"""The fuzzer's guarantee, kept by CI: mutated ONNX, SMAUG, LBANN and .pef files through the entry
points end in a result or a clean nnbridge error — no traceback, hang, memory blow-up, oversized
or partial output — for a fixed budget of inputs per format that reaches every mutation family,
every seed and every step (``make fuzz`` runs ten minutes per format). Inputs that once failed are
kept as fixtures (tests/fuzz_fixtures) and must stay clean."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import fuzz

FIXTURES = sorted((Path(__file__).parent / "fuzz_fixtures").glob("*/fixture.json"))
#: inputs per format: ONNX hits every family of fuzz.FAMILIES by index 130, SMAUG by 8, LBANN by 25,
#: PEF by 36; every (seed, step) pair is hit by 5 × seeds; 20-65 ms of CPU each (2,000 per format
#: cost 200 CPU-s of make test; ``make fuzz`` runs for minutes)
BUDGET = {"onnx": 200, "smaug": 100, "lbann": 100, "pef": 100}


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.parent.name)
def test_inputs_that_once_failed_end_cleanly(fixture, tmp_path):
    info = json.loads(fixture.read_text())
    folder = fixture.parent
    files = {info["open"]: (folder / info["open"]).read_bytes()}
    files.update({str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
                  if p.is_file() and p.name != "fixture.json" and str(p.relative_to(folder)) != info["open"]})
    for index in range(len(fuzz.STEPS)):  # through every entry point, not only the one that failed
        outcome, detail = fuzz.run_input(info["format"], files, info["index"] + index, tmp_path)
        assert outcome in fuzz.GOOD, detail


@pytest.mark.slow
@pytest.mark.parametrize("fmt", fuzz.FORMATS)
def test_a_fixed_fuzz_budget_finds_no_failure(fmt):
    import time

    start = time.monotonic()
    rows = fuzz.fuzz(fmt, seed=0, count=BUDGET[fmt])
    print("\n" + fuzz.table({fmt: rows}, {fmt: time.monotonic() - start}))
    assert len(rows) == BUDGET[fmt]
    bad = [f"#{r['index']} {r['outcome']}: {r['detail']}" for r in rows if r["outcome"] in fuzz.BAD]
    assert not bad, "\n".join(bad[:20])
    hit = {family for r in rows for family in r["families"]}
    assert set(fuzz.FAMILIES[fmt]) <= hit, f"the budget misses {sorted(set(fuzz.FAMILIES[fmt]) - hit)}"
    seeds = {r["seed"] for r in rows}
    pairs = {(r["seed"], fuzz.STEPS[r["index"] % len(fuzz.STEPS)]) for r in rows}
    assert len(seeds) >= 3 and pairs == {(s, step) for s in seeds for step in fuzz.STEPS}


def test_the_harness_reaches_every_outcome_it_reports(tmp_path, monkeypatch):
    """The classifier itself: a hang and a traceback are caught, not only clean errors."""

    assert fuzz.run_input("onnx", {"m.onnx": b"not a model"}, 0, tmp_path)[0] == "clean"

    def crash(*args):
        raise KeyError("x")

    monkeypatch.setattr(fuzz, "_exercise", crash)
    assert fuzz.run_input("onnx", {"m.onnx": b""}, 0, tmp_path)[0] == "traceback"
    monkeypatch.setattr(fuzz, "TIME_LIMIT_S", 1)
    def spin(*args):  # a hang is work that never ends: the limit is CPU time
        while True:
            pass

    monkeypatch.setattr(fuzz, "_exercise", spin)
    assert fuzz.run_input("onnx", {"m.onnx": b""}, 0, tmp_path)[0] == "hang"


def test_a_fuzz_run_removes_its_work_folder(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    rows = fuzz.fuzz("onnx", seed=0, count=2)
    assert len(rows) == 2 and not list(tmp_path.glob("nnbridge-fuzz-*"))


@pytest.mark.parametrize("manifest", [b'{"members": null}', b'{"members": 7}', b"[1, 2]", b"not json", None])
def test_the_pef_mutator_takes_archives_an_earlier_mutation_broke(manifest):
    """pef #2278 and #6788 of a 10-minute run: a second mutation of a manifest whose members the
    first had set to null killed the worker (TypeError in the mutator), reported as 'memory'."""
    import io
    import zipfile

    import numpy as np

    members = {"program.json": b'{"a": 1}', **({"manifest.json": manifest} if manifest is not None else {})}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    for seed in range(200):  # every branch of the mutator, the manifest's among them
        assert isinstance(fuzz._mutate_pef(buf.getvalue(), np.random.default_rng(seed), []), bytes)
