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
