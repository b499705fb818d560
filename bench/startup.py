"""The reference backend's fixed costs, for ``bench_architectures``: per-node dispatch, the first
run of a model (numba compiling its kernels, or loading them from the disk cache) and the whole
``nnbridge run`` command on a LeNet-sized model in a fresh process.

Each is measured as the median of several runs (processes for the command), never asserted in a
test: the machine is shared and its timings move.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DISPATCH_NODES = 1000
#: a model per compiled family: depthwise convolution and the curves, the recurrence, hard activations
FIRST_RUN_MODELS = ("efficientnet-b0", "bilstm", "mobilenetv3-large")


def _identity_chain(nodes: int):
    from onnx import TensorProto, helper

    chain = [helper.make_node("Identity", [f"v{i}"], [f"v{i + 1}"]) for i in range(nodes)]
    graph = helper.make_graph(chain, "identities", [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info(f"v{nodes}", TensorProto.FLOAT, [4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def dispatch_per_node(repeats: int = 51) -> tuple[float, float]:
    """Median µs per node of ``Executable.run`` and of ``Plan.execute`` on a chain of 1,000 Identity
    nodes compiled with no passes (an Identity kernel returns its input: what remains is dispatch)."""
    import nnbridge

    exe = nnbridge.compile(_identity_chain(DISPATCH_NODES), passes=[])
    feeds = {"v0": np.ones(4, np.float32)}

    def per_node(fn) -> float:
        fn()
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        return statistics.median(samples) / DISPATCH_NODES * 1e6

    return per_node(lambda: exe.run(feeds)), per_node(lambda: exe.plan.execute(feeds))


def first_runs(paths: dict[str, Path], feeds: dict[str, dict], cache: str) -> dict[str, dict[str, float]]:
    """In a fresh process whose numba cache is ``cache``: per model, seconds to compile and run
    once, and the median ms of the runs after."""
    job = {"paths": {name: str(p) for name, p in paths.items()}}
    with tempfile.TemporaryDirectory() as tmp:
        for name, given in feeds.items():
            np.savez(Path(tmp) / f"{name}.npz", **given)
        job["feeds"] = {name: str(Path(tmp) / f"{name}.npz") for name in feeds}
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=str(ROOT))
        done = subprocess.run([sys.executable, "-m", "bench.startup", json.dumps(job)], env=env, cwd=ROOT,
                              capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"first-run child failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _first_runs_child(job: dict) -> None:
    import nnbridge
    from bench.timing import median_time
    from nnbridge.kernels import compiled

    results = {}
    for name, path in job["paths"].items():
        with np.load(job["feeds"][name]) as data:
            feeds = {k: data[k] for k in data.files}
        with nnbridge.cpu_threads(1):
            start = time.perf_counter()
            exe = nnbridge.compile(path, backend="reference")
            exe.run(feeds)
            first = time.perf_counter() - start
            results[name] = {"first_s": first, "warm_ms": median_time(lambda e=exe, f=feeds: e.run(f)) * 1e3}
    results["kernels"] = compiled.describe()
    print(json.dumps(results))


def lenet_command(runs: int = 5) -> tuple[float, float, str]:
    """``nnbridge run`` on the zoo's LeNet-5 in fresh processes: (median wall s, median CPU s of the
    process, what the kernels were)."""
    import onnx

    from nnbridge.kernels import compiled
    from nnbridge.zoo import build

    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "lenet5.onnx"
        onnx.save(build("lenet5"), str(model))
        walls, cpus = [], []
        for _ in range(runs + 1):  # the first warms the file system and numba's cache
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "nnbridge", "run", str(model)], cwd=ROOT, check=True,
                           stdout=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=str(ROOT)))
            walls.append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(walls[1:]), statistics.median(cpus[1:]), compiled.describe()


if __name__ == "__main__":
    _first_runs_child(json.loads(sys.argv[1]))
