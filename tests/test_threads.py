"""``--threads N`` / ``nnbridge.cpu_threads``: numpy's BLAS and onnxruntime get the same count."""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_info

import nnbridge
from nnbridge.check import ort_session
from nnbridge.zoo import build


def _blas_threads() -> set[int]:
    return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}


def test_cpu_threads_sets_blas_and_onnxruntime_alike_and_restores_them():
    before = _blas_threads()
    model = build("mlp")
    with nnbridge.cpu_threads(1):
        assert _blas_threads() <= {1}
        assert ort_session(model).get_session_options().intra_op_num_threads == 1
        with nnbridge.cpu_threads(2):
            assert ort_session(model).get_session_options().intra_op_num_threads == 2
        assert ort_session(model).get_session_options().intra_op_num_threads == 1
    assert _blas_threads() == before
    assert ort_session(model).get_session_options().intra_op_num_threads == 0  # onnxruntime's own default


def test_threads_option_on_run_and_check(cli, tmp_path):
    import onnx

    path = tmp_path / "mlp.onnx"
    onnx.save(build("mlp"), path)
    code, text = cli("check", path, "--threads", "1")
    assert code == 0 and "agree" in text
    code, _ = cli("run", path, "--threads", "1", "--out", tmp_path / "out")
    assert code == 0 and all(np.isfinite(np.load(p)).all() for p in (tmp_path / "out").glob("*.npy"))
    code, text = cli("run", path, "--threads", "0")
    assert code == 1 and text.count("\n") == 1 and "--threads must be at least 1" in text


def test_kernel_blocks_cover_every_index_once_on_the_threads_in_force():
    import threading

    from nnbridge.kernels.parallel import run_blocks

    for threads, count in ((1, 7), (2, 7), (2, 1), (3, 10), (2, 0)):
        seen, names = [], set()
        parts = min(threads, max(count, 1))
        together = threading.Barrier(parts, timeout=30)  # every part waits for the others: they run at once

        def work(start, stop, seen=seen, names=names, together=together):
            seen.extend(range(start, stop))
            names.add(threading.current_thread().name)
            together.wait()

        with nnbridge.cpu_threads(threads):
            run_blocks(count, work)
        assert sorted(seen) == list(range(count))
        assert len(names) == parts


def test_blocked_kernels_give_the_same_values_on_one_thread_and_on_two():
    """GELU, SiLU and softmax share their blocks out over the threads; the values do not change."""
    from nnbridge.kernels.ops import fastmath
    from nnbridge.kernels.ops.softmax import _softmax_rows

    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 700, 1000)).astype(np.float32)  # several blocks each
    curves = (fastmath.gelu32, fastmath.silu32, fastmath.sigmoid32, _softmax_rows)
    with nnbridge.cpu_threads(1):
        alone = [curve(x) for curve in curves]
    with nnbridge.cpu_threads(2):
        shared = [curve(x) for curve in curves]
    for one, two in zip(alone, shared):
        np.testing.assert_array_equal(one, two)


def test_a_forked_child_runs_kernel_blocks_on_its_own_threads():
    """The pool's threads do not survive fork(); a child that inherited the pool must not wait on them."""
    import os
    import signal
    import time

    from nnbridge.kernels.parallel import run_blocks

    with nnbridge.cpu_threads(2):
        run_blocks(4, lambda start, stop: None)  # the parent's pool exists
        pid = os.fork()
        if pid == 0:  # the child: exit 0 only if its blocks all ran
            seen = []
            try:
                run_blocks(4, lambda start, stop: seen.extend(range(start, stop)))
            finally:
                os._exit(0 if sorted(seen) == [0, 1, 2, 3] else 1)
        deadline = time.monotonic() + 60
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        if done[0] == 0:  # still waiting on threads it does not have
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError("the forked child hung in run_blocks")
    assert os.waitstatus_to_exitcode(done[1]) == 0
