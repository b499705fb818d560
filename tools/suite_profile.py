"""Where the test suite spends CPU and memory: a pytest plugin and its summary.

The machine running the suite is shared, so wall time says little; this records, per test
(setup + call + teardown), the CPU seconds (user+sys) of the worker process, of the child
processes it waited for and of live descendants (Ray workers, the SMAUG binary), and the
peak RSS of the worker while the test ran (``/proc/self/clear_refs`` resets the high-water
mark before each test). Use it as::

    pytest -p tools.suite_profile --suite-profile=out/profile -n 2 tests
    python -m tools.suite_profile out/profile          # per-file totals, top tests, peak RSS

Each xdist worker writes ``<prefix>.<worker>.jsonl``; the summary adds the workers up.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--suite-profile", metavar="PREFIX", default=None,
                     help="write per-test CPU seconds and peak RSS to PREFIX.<worker>.jsonl")


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def _descendant_cpu() -> dict[int, float]:
    try:
        import psutil
    except ImportError:
        return {}
    found = {}
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
            found[child.pid] = times.user + times.system
        except psutil.Error:
            continue
    return found


class _Recorder:
    def __init__(self, prefix: str, worker: str) -> None:
        path = Path(f"{prefix}.{worker}.jsonl")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.out = path.open("w")
        self.worker = worker

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        resettable = _reset_peak()
        own0, wall0 = os.times(), time.time()
        live0 = _descendant_cpu()
        child_rss0 = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        yield
        own1, wall1 = os.times(), time.time()
        live1 = _descendant_cpu()
        live = sum(cpu - live0.get(pid, 0.0) for pid, cpu in live1.items())
        record = {
            "test": item.nodeid, "worker": self.worker, "start": wall0, "end": wall1,
            "cpu": (own1.user - own0.user) + (own1.system - own0.system),
            "children_cpu": (own1.children_user - own0.children_user)
            + (own1.children_system - own0.children_system) + max(live, 0.0),
            "peak_rss_mb": _status_kb("VmHWM") / 1024 if resettable else None,
            "rss_after_mb": _status_kb("VmRSS") / 1024,
            "child_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            if resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss > child_rss0 else 0.0,
        }
        self.out.write(json.dumps(record) + "\n")
        self.out.flush()


def pytest_configure(config: pytest.Config) -> None:
    prefix = config.getoption("--suite-profile")
    if prefix:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        if worker == "main" and getattr(config.option, "numprocesses", None):
            return  # the xdist controller runs no tests
        config.pluginmanager.register(_Recorder(prefix, worker), "suite-profile-recorder")


def _load(prefix: str) -> list[dict]:
    records = []
    for path in sorted(Path(prefix).parent.glob(Path(prefix).name + ".*.jsonl")):
        records += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return records


def _concurrent_peak(records: list[dict]) -> tuple[float, str]:
    """The largest sum, over workers, of the peak RSS of the tests running at the same moment."""
    events = sorted({r["start"] for r in records})
    best, where = 0.0, ""
    for moment in events:
        running = [r for r in records if r["start"] <= moment < r["end"] and r["peak_rss_mb"]]
        total = sum(r["peak_rss_mb"] for r in running)
        if total > best:
            best, where = total, " + ".join(r["test"] for r in running)
    return best, where


def summarize(prefix: str, top: int) -> None:
    records = _load(prefix)
    if not records:
        sys.exit(f"no profile records at {prefix}.*.jsonl")
    by_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for r in records:
        entry = by_file[r["test"].split("::")[0]]
        entry[0] += r["cpu"] + r["children_cpu"]
        entry[1] = max(entry[1], r["peak_rss_mb"] or 0.0)
        entry[2] += 1
    total = sum(r["cpu"] + r["children_cpu"] for r in records)
    print(f"{len(records)} tests, {total:.0f} CPU-s (user+sys, workers and their children)")
    print(f"\n{'CPU-s':>8} {'share':>6} {'peak MB':>8} {'tests':>6}  file")
    for name, (cpu, peak, count) in sorted(by_file.items(), key=lambda kv: -kv[1][0]):
        print(f"{cpu:8.1f} {100 * cpu / total:5.1f}% {peak:8.0f} {count:6d}  {name}")
    print(f"\nslowest {top} tests (CPU-s)")
    for r in sorted(records, key=lambda r: -(r["cpu"] + r["children_cpu"]))[:top]:
        print(f"{r['cpu'] + r['children_cpu']:8.1f}  {r['test']}")
    print(f"\nlargest {top} peak RSS (MB, worker; child)")
    for r in sorted(records, key=lambda r: -max(r["peak_rss_mb"] or 0, r["child_peak_rss_mb"]))[:top]:
        print(f"{r['peak_rss_mb'] or 0:8.0f} {r['child_peak_rss_mb']:8.0f}  {r['test']}")
    peak, where = _concurrent_peak(records)
    print(f"\npeak RSS summed over concurrently running tests: {peak:.0f} MB ({where})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prefix", help="the --suite-profile prefix the run wrote")
    parser.add_argument("--top", type=int, default=40, help="how many tests to list (default 40)")
    args = parser.parse_args()
    summarize(args.prefix, args.top)


if __name__ == "__main__":
    main()
