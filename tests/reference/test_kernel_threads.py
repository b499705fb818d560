"""Kernel threads: one pool for the compiled kernels' blocks and the matrix products (``kernels/parallel.py``,
``kernels/compiled/blas.py``), and the values it gives: every split is the one-thread result bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import nnbridge
from nnbridge.kernels import compiled, parallel

RNG = np.random.default_rng(23)
FIXTURES = Path(__file__).parents[1] / "fixtures" / "architectures"


@pytest.fixture(scope="module")
def blas():
    module = compiled.load("blas")
    if module is None:
        pytest.skip("numba is not installed: the numpy kernels run, and numpy's BLAS its own threads")
    return module


def test_the_compiled_kernels_share_their_blocks_on_numbas_tbb_layer(blas):
    """The dependencies install TBB and numpy's bundled OpenBLAS: the single pool is what runs here (a
    fallback to the Python pool would pass every other test and lose the threads' speed silently)."""
    import numba

    assert compiled.kernel_threads()
    assert blas.READY, f"OpenBLAS's {blas.CORE!r} kernels: where to cut their products was never measured"
    with nnbridge.cpu_threads(2):
        parallel.dot(np.ones((64, 64), np.float32), np.ones((64, 4096), np.float32))
    assert numba.threading_layer() == "tbb"
    assert "on numba's TBB layer" in compiled.describe()


def test_without_tbb_the_kernels_say_which_pool_runs_them(monkeypatch):
    compiled.load("conv")
    monkeypatch.setattr(compiled, "_TBB", [False])
    assert "Python pool" in compiled.describe() and "pip install tbb" in compiled.describe()


def test_on_a_core_whose_cuts_were_never_measured_products_stay_numpys_and_it_says_so(blas, monkeypatch):
    monkeypatch.setattr(blas, "READY", False)
    monkeypatch.setattr(blas, "CORE", "Neoverse")
    assert "OpenBLAS's Neoverse kernels" in compiled.describe() and "BLAS's own pool" in compiled.describe()
    with nnbridge.cpu_threads(2):
        a, b = RNG.standard_normal((300, 200)).astype(np.float32), RNG.standard_normal((200, 300)).astype(np.float32)
        assert np.array_equal(parallel.dot(a, b), np.dot(a, b))


def _operand(shape: tuple[int, int], dtype, layout: str) -> np.ndarray:
    if layout == "C":
        return RNG.standard_normal(shape).astype(dtype)
    if layout == "F":
        return np.asfortranarray(RNG.standard_normal(shape).astype(dtype))
    wider = RNG.standard_normal((shape[0], shape[1] + 5)).astype(dtype)  # a row stride past the row
    return wider[:, 2:2 + shape[1]]


def _numpys_blocks(blas, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy's one-thread product, or, for a product ``blas.dot`` always cuts into blocks below the
    small-kernel bound, numpy's product of each block at its one-thread cut."""
    by_rows, edge, blocks = blas._cut(a, b, 1)
    edges = parallel.bounds(edge, blas.CUTS.tile, blocks)
    with threadpool_limits(1):
        if by_rows:
            return np.concatenate([np.dot(a[lo:hi], b) for lo, hi in zip(edges, edges[1:])], axis=0)
        return np.concatenate([np.dot(a, b[:, lo:hi]) for lo, hi in zip(edges, edges[1:])], axis=1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_matrix_product_in_blocks_equals_numpys_one_thread_product_bit_for_bit(blas, dtype):
    """Random shapes around the small-kernel bound (``SMALL_GEMM``: below it OpenBLAS sums in another
    order, so a block must stay on the whole product's side, or a product too small for two blocks
    above it, or one the small kernels run faster (``SMALL_BLOCKS_FASTER``), is cut below it at every
    thread count), every operand layout numpy reads in place, one to three parts; numpy's own product
    at one BLAS thread is the reference (at two, OpenBLAS's threaded GEMM itself differs from it on
    some shapes), of each block for those always cut."""
    checked = cut_below = 0
    for _ in range(120):
        m, k, n = (int(v) for v in RNG.integers(2, 200, 3))
        a = _operand((m, k), dtype, RNG.choice(["C", "F", "strided"]))
        b = _operand((k, n), dtype, RNG.choice(["C", "F", "strided"]))
        want = _numpys_blocks(blas, a, b)
        with threadpool_limits(1):
            cut_below += not np.array_equal(want, np.dot(a, b))
        for parts in (1, 2, 3):
            got = blas.dot(a, b, parts)
            assert got is not None and got.dtype == want.dtype
            np.testing.assert_array_equal(got, want, err_msg=f"{m}x{k}x{n} {a.strides} {b.strides} parts={parts}")
            checked += 1
    assert checked == 360
    # the blocks below the bound are not np.dot's whole product (where the core has small kernels)
    assert cut_below > 0 or dtype == np.float64 or not blas.CUTS.small


@pytest.mark.parametrize("m, k, n", [(128, 64, 768), (32, 40, 1100), (64, 30, 600), (20, 50, 513), (96, 64, 700)])
def test_a_product_whose_rows_cut_unevenly_is_cut_by_columns_at_every_thread_count(blas, m, k, n):
    """BERT's 128 tokens, a 1×1 convolution's 32 or 64 channels: on a core whose columns do not keep
    their sums when cut (AVX2), such a product is two column blocks at every thread count, one
    included, each numpy's product of that block; rows that cut evenly (96) stay rows."""
    even = max(blas._block_lines(m, 2)) <= blas.UNEVEN * m / 2
    for layouts in (("C", "C"), ("F", "strided"), ("strided", "F")):
        a, b = _operand((m, k), np.float32, layouts[0]), _operand((k, n), np.float32, layouts[1])
        by_rows, _, blocks = blas._cut(a, b, 1)
        if not blas.CUTS.columns:
            assert (by_rows, blocks) == ((True, 1) if even else (False, blas.COLUMN_BLOCKS))
            assert blas.cut_alone(a, b) is not even
        want = _numpys_blocks(blas, a, b)
        for parts in (1, 2, 3):
            np.testing.assert_array_equal(blas.dot(a, b, parts), want, err_msg=f"{layouts} parts={parts}")
        with nnbridge.cpu_threads(1):  # a one-thread run takes the same blocks
            np.testing.assert_array_equal(parallel.dot(a, b), want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_matrix_vector_product_in_blocks_of_rows_equals_numpys_bit_for_bit(blas, dtype):
    """A classifier's product (one image's row times the weights, or the weights times a column),
    cut into blocks of the weights' rows: every row's sum is numpy's one-thread one. Only a C-contiguous
    matrix is cut (the other layouts sum differently in blocks, or in numpy's own call); those stay numpy's."""
    cut = 0
    for _ in range(60):
        m, k = (int(v) for v in RNG.integers(2, 1500, 2))
        layout = RNG.choice(["C", "F", "strided"])
        w = _operand((m, k), dtype, layout)
        x = RNG.standard_normal((k, 2)).astype(dtype)[:, :1]  # a column with a stride
        for a, b in ((w, x), (x.T, w.T)):
            with threadpool_limits(1):
                want = np.dot(a, b)
            for parts in (1, 2, 3):
                got = blas.dot(a, b, parts)
                if layout != "C":
                    assert got is None
                    continue
                np.testing.assert_array_equal(got, want, err_msg=f"{a.shape} {b.shape} parts={parts}")
                cut += 1
    assert cut > 60


def test_a_product_numpy_would_not_make_as_one_gemm_is_left_to_numpy(blas):
    a = RNG.standard_normal((40, 30)).astype(np.float32)
    assert blas.dot(a[:1], a[:30], 2) is None  # a row times a matrix whose columns OpenBLAS walks: numpy's
    assert blas.dot(a[::2], a[:30], 2) is None  # a row stride numpy copies first (every other row)
    assert blas.dot(a, a.T, 2) is None  # one buffer both sides: numpy's SYRK
    with nnbridge.cpu_threads(2):
        np.testing.assert_array_equal(parallel.dot(a, a.T), np.dot(a, a.T))


def test_stacks_of_products_over_threads_equal_numpys_one_thread_matmul(blas):
    """Attention's products: heads as transposed views of (batch, sequence, heads, width) that do not
    flatten into one stack axis, and a plain contiguous stack."""
    for _ in range(40):
        batch, heads = (int(v) for v in RNG.integers(1, 4, 2))
        seq, width = (int(v) for v in RNG.integers(2, 120, 2))
        q = RNG.standard_normal((batch, seq, heads, width)).astype(np.float32).transpose(0, 2, 1, 3)
        k = RNG.standard_normal((batch, seq, heads, width)).astype(np.float32).transpose(0, 2, 3, 1)
        v = RNG.standard_normal((batch, heads, seq, width)).astype(np.float32)
        for x, y in ((q, k), (np.ascontiguousarray(q @ k), v), (v.reshape(-1, seq, width), k.reshape(-1, width, seq))):
            with threadpool_limits(1):
                want = np.matmul(x, y)
            for parts in (1, 2, 3):
                got = blas.matmul(x, y, parts)
                assert got is not None
                np.testing.assert_array_equal(got, want)


@pytest.fixture
def split_everything(monkeypatch):
    """Every block worth a thread, so that small fixtures split wherever a kernel can."""
    monkeypatch.setattr(parallel, "TWIN_MIN_WORK", 1)
    monkeypatch.setattr(parallel, "DOT_MIN_WORK", 1)
    monkeypatch.setattr(parallel, "MIN_WORK", 1)


@pytest.mark.parametrize("pool", ["tbb", "python"])
@pytest.mark.parametrize("name", ["mobilenetv3", "regnet", "efficientnet", "poolformer", "vit", "whisper-encoder"])
def test_a_network_gives_the_same_values_at_one_two_and_three_threads(split_everything, monkeypatch, pool, name):
    """Depthwise and grouped convolutions, 1×1 and im2col products, pools, fused curves, attention:
    each split (by TBB's ``prange`` twins and the product blocks, or by the Python pool where TBB is
    missing) adds each output's terms as one thread does."""
    compiled.load("conv")
    if pool == "python":
        monkeypatch.setattr(compiled, "_TBB", [False])
    with np.load(FIXTURES / f"{name}.npz") as data:
        feeds = {key: data[key] for key in data.files}
    runs = []
    for threads in (1, 2, 3):
        with nnbridge.cpu_threads(threads):
            exe = nnbridge.compile(str(FIXTURES / f"{name}.onnx"), backend="reference")
            runs.append(exe.run(feeds))
    for name_, value in runs[0].items():
        np.testing.assert_array_equal(runs[1][name_], value, err_msg=f"{name_} at 2 threads")
        np.testing.assert_array_equal(runs[2][name_], value, err_msg=f"{name_} at 3 threads")


def test_a_plans_run_at_two_threads_keeps_its_other_blas_calls_in_its_own_thread(blas):
    """A vector product or a recurrence's step goes to numpy's BLAS directly: during a run at more
    than one thread that BLAS is held to the calling thread (its pool, once woken, spins on the core
    the kernel threads' blocks need), and given back after."""
    path = FIXTURES / "mobilenetv3.onnx"
    with np.load(path.with_suffix(".npz")) as data:
        feeds = {key: data[key] for key in data.files}
    with nnbridge.cpu_threads(2):
        exe = nnbridge.compile(str(path), backend="reference")
        seen = []

        def observe(node, outputs):
            seen.append(blas.one_thread(1))  # the count in force (this call sets what is already set)

        exe.plan.execute(feeds, observe=observe)
        after = blas.one_thread(0)
        blas.one_thread(after)
    assert seen and set(seen) == {1}
    assert after != 1


UFUNCS = [np.exp, np.tanh, np.log, np.sin, np.sqrt, np.reciprocal, np.arctan, np.add, np.subtract,
          np.multiply, np.divide, np.power, np.maximum]
#: (shape of the first input, of the second): same shape, a scalar, a repeated row (a bias), a
#: repeated column (a per-row statistic); then two broadcasts whose rows lie no fixed stride apart
#: (numpy's own call then)
#: operand shapes: the first ``DESCRIBED`` read as rows of one width (a per-channel scale of a map
#: among them: rows of H·W), the rest not (numpy's call)
LAYOUTS = [((6, 40, 33), (6, 40, 33)), ((6, 40, 33), ()), ((6, 40, 33), (33,)), ((240, 33), (240, 1)),
           ((6, 40, 33), (40, 33)), ((1, 8, 6, 7), (8, 1, 1)), ((6, 40, 33), (6, 1, 33))]
DESCRIBED = 6


def _specials(shape: tuple[int, ...], dtype) -> np.ndarray:
    x = np.asarray(RNG.standard_normal(shape) * 4, dtype=dtype)
    flat = x.reshape(-1)
    flat[::37] = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-42, 88.9, -104.0], dtype=np.float64)[
        np.arange(flat[::37].size) % 8].astype(dtype)
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("fn", UFUNCS, ids=lambda f: f.__name__)
def test_numpys_elementwise_loops_over_the_kernel_threads_equal_numpys_call_bit_for_bit(split_everything, dtype, fn):
    """Every block of the output is numpy's own loop on those elements: at any cut, in place or not,
    with NaN, ±inf, zeros of both signs and subnormals, the values are numpy's call's."""
    shared = compiled.load("ufuncs")
    if shared is None:
        pytest.skip("numba is not installed: numpy's own calls run")
    for first, second in LAYOUTS[:1] if fn.nin == 1 else LAYOUTS:
        inputs = (_specials(first, dtype),) if fn.nin == 1 else (_specials(first, dtype), _specials(second, dtype))
        with np.errstate(all="ignore"):
            want = fn(*inputs)
            for threads in (2, 3):
                with nnbridge.cpu_threads(threads):
                    got = parallel.ufunc(fn, *inputs)
                    in_place = inputs[0].copy()
                    parallel.ufunc(fn, in_place, *inputs[1:], out=in_place)
                assert got.dtype == want.dtype and got.shape == want.shape
                assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (fn.__name__, first, second, threads)
                assert np.array_equal(in_place.view(np.uint8), want.view(np.uint8)), (fn.__name__, "in place")


def test_a_layout_the_rows_can_describe_runs_numpys_loop_in_blocks_at_any_cut():
    """The blocks really are the compiled loop's (not numpy's call taken as a fallback), each cut
    anywhere in a row: the values are the whole call's."""
    shared = compiled.load("ufuncs")
    if shared is None:
        pytest.skip("numba is not installed")
    calls = []

    def cut_at_random(count, work, serial, twin, *args):
        calls.append(count)
        edges = np.unique(np.concatenate([[0, count], RNG.integers(0, count, 5)]))
        for lo, hi in zip(edges[:-1], edges[1:]):
            serial(int(lo), int(hi))

    for first, second in LAYOUTS[:DESCRIBED]:
        a, b = _specials(first, np.float32), _specials(second, np.float32)
        with np.errstate(all="ignore"):
            got = shared.apply(np.divide, (a, b), None, 1, cut_at_random)
            assert got is not None and np.array_equal(got.view(np.uint8), np.divide(a, b).view(np.uint8))
    assert len(calls) == DESCRIBED
    for first, second in LAYOUTS[DESCRIBED:]:
        a, b = _specials(first, np.float32), _specials(second, np.float32)
        assert shared.apply(np.add, (a, b), None, 1, cut_at_random) is None  # numpy's call
    assert shared.apply(np.add, (np.ones(40, np.int32), np.ones(40, np.int32)), None, 1, cut_at_random) is None
    assert shared.apply(np.add, (a, b.astype(np.float64)), None, 1, cut_at_random) is None  # numpy would cast
    overlapping = np.zeros(2000, np.float32)
    assert shared.apply(np.add, (overlapping[1:], overlapping[1:]), overlapping[:-1], 1, cut_at_random) is None
