"""Reference backend latency against onnxruntime on real architectures, 1 thread and all threads.

The set: the real-architecture test fixtures (``tests/fixtures/architectures``: small
configurations, where per-operator overhead counts), architectures exported by
``torch.onnx.export`` (``bench/architectures.py``: HF transformers with random weights, CNN
families in plain torch, BERT-base and ResNet-50 at full size) and onnx's nine light CNNs.
Both runtimes run in this process on the same inputs with the same thread count
(``nnbridge.cpu_threads``: numpy's BLAS and onnxruntime's intra-op pool); onnxruntime keeps its
default graph optimisations. A ratio
counts only when the outputs agree (max error ≤ 1e-3 of the output's scale). Results go to
stdout and to ``docs/benchmarks.md``. Each latency is the least of several runs after a warm-up
(``timing.best_time``: the calling thread's CPU time at 1 thread, wall time at more), because
this machine is shared and a run is only ever slowed by the others, taken in ``ROUNDS``
alternating rounds of the two runtimes.

Beside each ratio, the BLAS floor: the time numpy's BLAS takes for the model's matrix products
alone (Conv as im2col products, MatMul, Gemm; operands ready), over onnxruntime's whole model.
No change on the Python side can bring a model below its floor, so a floor above the target
says the target needs a faster BLAS than numpy's, not better kernels.

Targets (issue 33), judged where OpenBLAS picks its own kernels: geometric mean ≤ 1.5 over the
architectures at 1 thread and at all threads with no model above 2.5×, the fixtures' geometric
mean ≤ 3 (issue 17's light-model target, ≤ 1.3, is printed too). When the environment pins
OpenBLAS (``OPENBLAS_CORETYPE``), a child process measures again without the pin
(``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` unset); when it does not, the child measures with
the Haswell pin the environment's notes describe, so both figures are always printed.

Also printed: which kernels ran (numba's compiled ones, or numpy only: ``NNBRIDGE_NO_NUMBA=1``),
the dispatch cost per node, first runs (with numba compiling into an empty cache, then loading
from it) against warm runs, and ``nnbridge run`` on LeNet-5 in fresh processes (``startup.py``).
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import sys
import tempfile
from collections import Counter
from functools import partial
from pathlib import Path

import numpy as np

from bench.timing import best_time

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "architectures"
CACHE = Path(os.environ.get("NNBRIDGE_BENCH_CACHE", Path(tempfile.gettempdir()) / "nnbridge-bench-architectures"))
BUDGET_S = float(os.environ.get("NNBRIDGE_BENCH_BUDGET", 1.5))  # measuring time per model and runtime
#: the budget is spent in this many alternating rounds (nnbridge, onnxruntime, nnbridge, …), each
#: runtime's time the least over its rounds: this shared machine has slow phases of seconds to
#: minutes (measured: MobileNetV3-small at 2 threads 2.4-2.6 ms, then 3.6-3.9 for minutes, then
#: 2.4 again), which one window of 25 runs (60 ms) each, one after the other, would put on one
#: runtime alone
ROUNDS = 3
TARGET_GEOMEAN, TARGET_MAX, TARGET_FIXTURES, TARGET_LIGHT = 1.5, 2.5, 3.0, 1.3
TARGET_DISPATCH_US, TARGET_LENET_S = 2.0, 2.0
PIN = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def _agree(ours: dict, theirs: list, names: list[str]) -> bool:
    for name, want in zip(names, theirs):
        got = np.asarray(ours[name], dtype=np.float64)
        want = np.asarray(want, dtype=np.float64)
        scale = max(float(np.abs(want).max()), 1e-6) if want.size else 1.0
        if got.shape != want.shape or not np.all(np.abs(got - want) <= 1e-3 * scale):
            return False
    return True


def _measure(path: Path, feeds: dict, threads: int) -> tuple[float, float, float, bool]:
    """(nnbridge s, onnxruntime s, BLAS floor s, outputs agree) at ``threads`` threads."""

    import nnbridge
    from nnbridge.check import ort_session

    with nnbridge.cpu_threads(threads):
        exe = nnbridge.compile(str(path), backend="reference")
        session = ort_session(_load(path), level="ORT_ENABLE_ALL")
        names = [o.name for o in session.get_outputs()]
        wanted = {i.name for i in session.get_inputs()}
        ort_feeds = {k: v for k, v in feeds.items() if k in wanted}
        agree = _agree(exe.run(feeds), session.run(names, ort_feeds), names)
        ours = theirs = float("inf")
        for _ in range(ROUNDS):
            ours = min(ours, best_time(lambda: exe.run(feeds), threads, budget_s=BUDGET_S / ROUNDS))
            theirs = min(theirs, best_time(lambda: session.run(names, ort_feeds), threads, budget_s=BUDGET_S / ROUNDS))
        return ours, theirs, _blas_floor(exe, feeds, threads), agree


def _matrix_products(exe, feeds: dict) -> Counter:
    """(batch, M, K, N) of every matrix product the model's Conv, MatMul and Gemm nodes make, with
    counts, from the shapes of one run (depthwise convolutions are not matrix products)."""
    from nnbridge.ir.feeds import match_inputs

    shapes = {name: np.shape(value) for name, value in exe.graph.initializers.items()}
    given = match_inputs(exe.graph, feeds, complete=True)
    shapes.update((name, np.shape(value)) for name, value in given.items())

    def see(node, outputs) -> None:
        shapes.update((o.name, np.shape(v)) for o, v in zip(node.outputs, outputs))

    exe.plan.execute(given, observe=see)
    products: Counter = Counter()
    for node in exe.graph.nodes:
        if node.op == "Conv":
            w, y, group = shapes[node.inputs[1].name], shapes[node.outputs[0].name], int(node.attr("group", 1))
            if w[1] > 1:
                products[(group, w[0] // group, math.prod(w[1:]), y[0] * math.prod(y[2:]))] += 1
        elif node.op in ("MatMul", "Gemm"):
            a, b = (list(shapes[v.name]) for v in node.inputs[:2])
            if node.op == "Gemm":
                a = a[::-1] if node.attr("transA", 0) else a
                b = b[::-1] if node.attr("transB", 0) else b
            a, b = ([1] + a if len(a) == 1 else a), (b + [1] if len(b) == 1 else b)
            if len(b) == 2:  # a stack of rows times one matrix is one GEMM (as linalg.matmul_nd runs it)
                a = [math.prod(a[:-1]), a[-1]]
            batch = math.prod(np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2])))
            products[(batch, a[-2], a[-1], b[-1])] += 1
    return products


def _blas_floor(exe, feeds: dict, threads: int) -> float:
    """Seconds numpy's BLAS needs for the model's matrix products alone (operands ready, no
    im2col, no other op): a floor under the reference backend's latency that no Python-side
    change can lower, measured at the caller's thread count."""
    total = 0.0
    for (batch, m, k, n), count in _matrix_products(exe, feeds).items():
        a, b = np.full((batch, m, k), 0.5, np.float32), np.full((batch, k, n), 0.5, np.float32)
        if batch == 1:
            a, b = a[0], b[0]
        total += count * best_time(partial(np.matmul, a, b), threads, budget_s=0.1)
    return total


def _load(path: Path):
    import onnx

    return onnx.load(str(path))


def _cases() -> list[tuple[str, str, Path, dict]]:
    """(group, name, model path, feeds) for every model of the set."""
    import onnx

    from nnbridge.zoo.corpus import LIGHT_MODELS, TIED_SOFTMAX, light_case, logits_model

    cases = []
    for path in sorted(FIXTURES.glob("*.onnx")):  # the pretrained-models issue's fixtures, as the tests run them
        with np.load(path.with_suffix(".npz")) as data:
            cases.append(("fixtures", path.stem, path, {k: data[k] for k in data.files}))
    try:
        from bench.architectures import ARCHITECTURES, export

        CACHE.mkdir(parents=True, exist_ok=True)
        for arch in ARCHITECTURES:
            print(f"  exporting {arch.name} …", end="\r", file=sys.stderr, flush=True)
            path, feeds = export(arch, CACHE)
            cases.append(("architectures", arch.name, path, feeds))
    except ImportError as exc:
        print(f"architectures skipped: {exc} (make bench installs the 'bench' extra: torch, transformers)")
    for name in LIGHT_MODELS:
        case = light_case(name)
        path = case.model_path
        if name in TIED_SOFTMAX:  # its softmax is round-off's: the two runtimes' logits are compared
            CACHE.mkdir(parents=True, exist_ok=True)
            path = CACHE / f"light_{name}_logits.onnx"
            onnx.save(logits_model(onnx.load(str(case.model_path))), str(path))
        cases.append(("light", name, path, case.inputs[0]))
    return cases


def _geomean(values: list[float]) -> float:
    return math.exp(statistics.mean(math.log(v) for v in values)) if values else float("nan")


def _blas() -> str:
    """numpy's BLAS and the kernels it runs (OPENBLAS_CORETYPE pins them)."""
    from threadpoolctl import threadpool_info

    info = next((i for i in threadpool_info() if i.get("user_api") == "blas"), {})
    pinned = os.environ.get("OPENBLAS_CORETYPE")
    return (f"{info.get('internal_api', '?')} {info.get('version', '')} {info.get('architecture', '')} kernels"
            + (f" (pinned by OPENBLAS_CORETYPE={pinned} in the environment)" if pinned else ""))


def _measure_all(settings: list[int], echo: bool) -> tuple[list[str], dict, list[str]]:
    """Table lines, (model, ratio, BLAS floor ratio) per (group, threads) and the models whose
    outputs differ."""
    header = "| group | model | " + " | ".join(
        f"nnbridge ms ({t}t) | onnxruntime ms ({t}t) | ratio ({t}t) | BLAS floor ({t}t)" for t in settings) + " |"
    lines = [header, "|---|---|" + "---|---|---|---|" * len(settings)]
    if echo:
        print(header)
        print(lines[1])
    ratios: dict[tuple[str, int], list[tuple[str, float, float]]] = {}
    disagree = []
    for group, name, path, feeds in _cases():
        cells = []
        for threads in settings:
            t_nb, t_ort, t_floor, agree = _measure(path, feeds, threads)
            ratio = t_nb / t_ort
            if agree:
                ratios.setdefault((group, threads), []).append((name, ratio, t_floor / t_ort))
            elif threads == settings[0]:
                disagree.append(name)
            cells.append(f"{t_nb * 1e3:.2f} | {t_ort * 1e3:.2f} | {ratio:.2f}{'' if agree else ' (outputs differ)'}"
                         f" | {t_floor / t_ort:.2f}")
        line = f"| {group} | {name} | " + " | ".join(cells) + " |"
        lines.append(line)
        if echo:
            print(line, flush=True)
    return lines, ratios, disagree


def _summary(ratios: dict) -> tuple[list[str], bool]:
    summary, ok = [], True
    for (group, threads), rows in sorted(ratios.items()):
        geo = _geomean([r for _, r, _ in rows])
        worst_name, worst, _ = max(rows, key=lambda row: row[1])
        target = {"light": TARGET_LIGHT, "fixtures": TARGET_FIXTURES}.get(group, TARGET_GEOMEAN)
        capped = group == "architectures"
        floored = ", ".join(f"{name} {floor:.2f}" for name, _, floor in rows if floor > target)
        passed = geo <= target and (not capped or worst <= TARGET_MAX)
        ok &= passed
        summary.append(f"{group}, {threads} thread{'s' if threads > 1 else ''}: geometric mean {geo:.2f} "
                       f"(target ≤ {target}), worst {worst_name} {worst:.2f}"
                       f"{f' (target ≤ {TARGET_MAX})' if capped else ''} over {len(rows)} models "
                       f"— {'met' if passed else 'NOT met'}; BLAS floor geometric mean "
                       f"{_geomean([f for _, _, f in rows]):.2f}"
                       + (f", above {target} from the matrix products alone: {floored}" if floored else ""))
    return summary, ok


def _pinned() -> bool:
    return any(os.environ.get(name) for name in PIN)


def _other_pin_run(settings: list[int]) -> tuple[str, list[str], list[str]]:
    """The whole measurement again in a child with the other pin: (what it ran, summary lines,
    table lines)."""
    import subprocess

    env = dict(os.environ)
    if _pinned():
        for name in PIN:
            env.pop(name, None)
        label = "without the environment's pin (OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset)"
    else:
        env["OPENBLAS_CORETYPE"] = "Haswell"
        label = "with OPENBLAS_CORETYPE=Haswell (the pin the environment's notes describe)"
        if " Haswell kernels" in _blas():  # an AVX2 machine: the pin would choose the kernels already running
            return label, ["not run again: OpenBLAS already runs its Haswell kernels on this machine"], []
    done = subprocess.run([sys.executable, "-m", "bench.bench_architectures", "--child", *map(str, settings)],
                          env=env, capture_output=True, text=True, check=False)
    lines = done.stdout.splitlines()
    summary = [line for line in lines if line.startswith(("blas:", "fixtures", "architectures", "light"))]
    table = [line for line in lines if line.startswith("|")]
    if not summary:
        summary = [f"(the child run failed: {done.stderr.strip().splitlines()[-1:]})"]
    return label, summary, table


def _startup_lines(cases: list) -> list[str]:
    """Dispatch, first runs and the LeNet command (bench/startup.py)."""
    import tempfile

    from bench import startup

    lines = []
    run_us, plan_us = startup.dispatch_per_node()
    lines.append(f"dispatch: {run_us:.2f} µs per node through Executable.run, {plan_us:.2f} in Plan.execute "
                 f"(median of 51 runs of {startup.DISPATCH_NODES:,} Identity nodes; target ≤ {TARGET_DISPATCH_US}) "
                 f"— {'met' if run_us <= TARGET_DISPATCH_US else 'NOT met'}")
    chosen = {name: (path, feeds) for group, name, path, feeds in cases if name in startup.FIRST_RUN_MODELS}
    if chosen:
        paths = {name: path for name, (path, _) in chosen.items()}
        feeds = {name: given for name, (_, given) in chosen.items()}
        with tempfile.TemporaryDirectory() as cache:
            empty = startup.first_runs(paths, feeds, cache)
            warm = startup.first_runs(paths, feeds, cache)
        for name in chosen:
            lines.append(f"first run of {name} (compile + one run, 1 thread): {empty[name]['first_s']:.2f} s with an "
                         f"empty numba cache, {warm[name]['first_s']:.2f} s with the cache it left; warm runs "
                         f"{warm[name]['warm_ms']:.2f} ms")
    wall, cpu, kernels = startup.lenet_command()
    lines.append(f"nnbridge run lenet5.onnx in a fresh process: {wall:.2f} s wall, {cpu:.2f} s CPU (median of 5; "
                 f"target < {TARGET_LENET_S} s; LeNet needs no compiled kernel, so numba is not even imported) "
                 f"— {'met' if wall < TARGET_LENET_S else 'NOT met'}")
    return lines


def main(argv: list[str] | None = None) -> int:
    import onnx
    import onnxruntime as ort

    from nnbridge.api.threads import all_cores
    from nnbridge.kernels import compiled

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:  # _other_pin_run's child: the summary and the table only
        print(f"blas: {_blas()}")
        lines, ratios, _ = _measure_all([int(t) for t in argv[1:]], echo=False)
        print("\n".join(_summary(ratios)[0]))
        print("\n".join(lines))
        return 0
    cores = all_cores()
    machine = (f"{platform.processor() or platform.machine()}, {cores} cores, python {platform.python_version()}, "
               f"numpy {np.__version__} ({_blas()}), onnxruntime {ort.__version__}, onnx {onnx.__version__}")
    settings = [1] if cores == 1 else [1, cores]
    print(f"machine: {machine}")
    print(f"kernels: {compiled.describe()}")
    lines, ratios, disagree = _measure_all(settings, echo=True)
    summary, ok = _summary(ratios)
    if disagree:
        summary.append(f"outputs differ (not counted): {', '.join(disagree)}")
    print()
    for line in summary:
        print(line)
    label, other, other_table = _other_pin_run(settings)
    print(f"\nthe same {label}:")
    for line in other:
        print(f"  {line}")
    unpinned_ok = ok if not _pinned() else all("NOT met" not in line for line in other if not line.startswith("light"))
    startup = _startup_lines(_cases())
    print()
    for line in startup:
        print(line)
    pin = ("the environment pins OpenBLAS (" + ", ".join(f"{n}={os.environ[n]}" for n in PIN if os.environ.get(n))
           + "): the targets are judged on the unpinned run below") if _pinned() else \
        "the environment does not pin OpenBLAS: these are the unpinned figures the targets are judged on"
    DOC.write_text(
        "# Benchmarks\n\n"
        "Written by `make bench` (`bench/bench_architectures.py`): the reference backend's latency against\n"
        "onnxruntime's (default graph optimisations) in one process, on the same inputs, with the same\n"
        "thread count on both sides (`nnbridge.cpu_threads` / `--threads`). `fixtures` are the test\n"
        "fixtures of real architectures (`tests/fixtures/architectures`, small configurations); `architectures`\n"
        "are exported by `torch.onnx.export` from `bench/architectures.py` (random weights; BERT-base,\n"
        "ResNet-50, DenseNet-121, EfficientNet-B0 and the MobileNetV3s at full size, the OCR classifier at\n"
        "PaddleOCR's); `light` are onnx's nine light CNNs. Ratio = nnbridge / onnxruntime, each the least\n"
        "of several runs after a warm-up (CPU time of the calling thread at 1 thread, wall time at more:\n"
        "the machine is shared, and a run is only ever slowed by others), in three alternating rounds of\n"
        "the two runtimes (a slow phase of the machine then weighs on both). BLAS floor = the time numpy's\n"
        "BLAS takes for the model's matrix products alone (Conv as im2col products, MatMul, Gemm; operands\n"
        "ready) / onnxruntime's whole model: no Python-side change brings a model below it.\n\n"
        f"Machine: {machine}.\n\nKernels: {compiled.describe()}.\n\n"
        f"In this run {pin}.\n\n" + "\n".join(f"- {line}" for line in summary) + "\n\n"
        + f"The same {label}:\n\n" + "\n".join(f"- {line}" for line in other) + "\n\n"
        + "Fixed costs:\n\n" + "\n".join(f"- {line}" for line in startup) + "\n\n"
        + "\n".join(lines) + "\n\n"
        + (f"The table {label}:\n\n" + "\n".join(other_table) + "\n" if other_table else ""))
    print(f"\nwrote {DOC}")
    return 0 if unpinned_ok and not disagree else 1


if __name__ == "__main__":
    raise SystemExit(main())
