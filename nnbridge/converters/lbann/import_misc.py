"""Importers for LBANN's index, statistics, mini-batch and loss layers (src/layers/misc, transform,
loss), each built from ONNX ops with LBANN's semantics: indices are floor()ed float values and
out-of-range ones give zeros (gather, one_hot) or are skipped (scatter); argmax/argmin and the
accuracy layers take the first extreme; losses and statistics give one value per sample.

Loss and metric layers are only imported when asked for (``lbann_training_layers``): by default
import leaves them, with the labels that feed them, to the experiment kept for LBANN writes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ...base.errors import FormatError, ShapeError
from ...ir import DType, Value
from .import_context import ImportContext, Tensor
from .import_ops import broadcast_constant, embedding_lookup, importer, layer_inputs, pool_geometry, same_shapes

FLOAT, INT, BOOL = DType.FLOAT32, DType.INT64, DType.BOOL


def _flat(ctx: ImportContext, x: Tensor) -> Tensor:
    return x if len(x.dims) == 1 else ctx.emit("Flatten", [x], (math.prod(x.dims),), {"axis": 1})


def _per_sample(ctx: ImportContext, op: str, x: Tensor) -> Tensor:
    """``op`` (ReduceSum/ReduceMean/ReduceMax) over every entry of each sample → dims (1,)."""
    return ctx.emit(op, [_flat(ctx, x), ctx.ints([1], "axes")], (1,), {"keepdims": 1}, final=True)


def _float(ctx: ImportContext, flag: Tensor, final: bool = True) -> Tensor:
    return ctx.emit("Cast", [flag], flag.dims, {"to": FLOAT.onnx}, final=final)


def _index_in_range(ctx: ImportContext, x: Tensor, size: int) -> tuple[Tensor, Tensor]:
    """(floor(x) as int64 with out-of-range entries replaced by 0, the in-range mask)."""
    index = ctx.emit("Floor", [x], x.dims)
    zero, bound = ctx.const(np.float32(0), "zero"), ctx.const(np.float32(size), "bound")
    valid = ctx.emit("And", [ctx.emit("GreaterOrEqual", [index, zero], x.dims, dtype=BOOL),
                             ctx.emit("Less", [index, bound], x.dims, dtype=BOOL)], x.dims, dtype=BOOL)
    safe = ctx.emit("Where", [valid, index, zero], x.dims)
    return ctx.emit("Cast", [safe], x.dims, {"to": INT.onnx}, dtype=INT), valid


def _spread(ctx: ImportContext, index: Tensor, dims: tuple[int, ...], axis: int, dtype: DType) -> Tensor:
    """A per-sample index vector (K,) broadcast along the other axis of a 2-D sample ``dims``."""
    other = 2 if axis == 1 else 1
    column = ctx.emit("Unsqueeze", [index, ctx.ints([other], "axes")],
                      (index.dims[0], 1) if axis == 1 else (1, index.dims[0]), dtype=dtype)
    return ctx.emit("Expand", [column, ctx.ints((ctx.batch, *dims), "shape")], dims, dtype=dtype)


def _axis(params) -> int:
    return int(params.axis.value) if params.HasField("axis") else 1


def _distconv(ctx: ImportContext, values: Tensor, indices: Tensor, params, verb: str
              ) -> tuple[Tensor, Tensor] | None:
    """LBANN's distconv build gathers and scatters 3-D tensors along axis 0: values [N, W, 1] and
    indices [K, 1, 1] (src/layers/transform/gather.hpp, scatter.hpp), as its 2-D form does on
    [N, W] and [K]; those views, or None for other shapes."""
    if len(values.dims) != 3 or len(indices.dims) != 3:
        return None
    if values.dims[2] != 1 or indices.dims[1:] != (1, 1) or _axis(params) != 0:
        raise ShapeError(f"{ctx.where()}: {verb} {list(indices.dims)} indices and {list(values.dims)} values on "
                         f"axis {_axis(params)}; LBANN's distconv form takes [N, W, 1] values, [K, 1, 1] indices "
                         f"and axis 0")
    flat = [ctx.emit("Reshape", [t, ctx.ints((ctx.batch, *dims), "view")], dims)
            for t, dims in ((values, values.dims[:2]), (indices, indices.dims[:1]))]
    return flat[0], flat[1]


def _as_3d(ctx: ImportContext, y: Tensor) -> list[Tensor]:
    dims = (*y.dims, 1)
    return [ctx.emit("Reshape", [y, ctx.ints((ctx.batch, *dims), "shape")], dims, final=True)]


@importer("gather")
def _gather(ctx, layer, params, inputs):
    values, indices = layer_inputs(ctx, inputs, 2)
    if (views := _distconv(ctx, values, indices, params, "gathers")) is not None:
        return _as_3d(ctx, _gather_2d(ctx, *views, axis0=True, final=False))
    if len(indices.dims) != 1 or len(values.dims) not in (1, 2):
        raise ShapeError(f"{ctx.where()}: gathers {list(indices.dims)} indices from {list(values.dims)} values; "
                         f"LBANN takes a vector of indices and 1-D or 2-D values")
    return [_gather_2d(ctx, values, indices, axis0=len(values.dims) == 2 and _axis(params) == 0)]


def _gather_2d(ctx: ImportContext, values: Tensor, indices: Tensor, axis0: bool, final: bool = True) -> Tensor:
    k = indices.dims[0]
    bound = values.dims[0] if axis0 else values.dims[-1]
    index, valid = _index_in_range(ctx, indices, bound)
    if len(values.dims) == 1:
        out_dims, gather_axis = (k,), 1
    else:
        out_dims = (k, values.dims[1]) if axis0 else (values.dims[0], k)
        gather_axis = 1 if axis0 else 2
        index, valid = _spread(ctx, index, out_dims, gather_axis, INT), _spread(ctx, valid, out_dims, gather_axis,
                                                                               BOOL)
    picked = ctx.emit("GatherElements", [values, index], out_dims, {"axis": gather_axis})
    return ctx.emit("Where", [valid, picked, ctx.const(np.float32(0), "zero")], out_dims, final=final)


@importer("scatter")
def _scatter(ctx, layer, params, inputs):
    values, indices = layer_inputs(ctx, inputs, 2)
    out_dims = tuple(int(d) for d in params.dims)
    if (views := _distconv(ctx, values, indices, params, "scatters")) is not None:
        if len(out_dims) != 3 or out_dims[1:] != values.dims[1:]:
            raise ShapeError(f"{ctx.where()}: scatters {list(values.dims)} values into {list(out_dims)}; LBANN's "
                             f"distconv form keeps the values' last two dims")
        return _as_3d(ctx, _scatter_2d(ctx, *views, out_dims[:2], axis0=True, final=False))
    if len(values.dims) not in (1, 2) or len(out_dims) != len(values.dims):
        raise ShapeError(f"{ctx.where()}: scatters {list(values.dims)} values into {list(out_dims)}; LBANN "
                         f"scatters 1-D or 2-D values into a tensor of the same rank")
    return [_scatter_2d(ctx, values, indices, out_dims, axis0=len(values.dims) == 2 and _axis(params) == 0)]


def _scatter_2d(ctx: ImportContext, values: Tensor, indices: Tensor, out_dims: tuple[int, ...], axis0: bool,
                final: bool = True) -> Tensor:
    bound = out_dims[0] if axis0 else out_dims[-1]
    index, valid = _index_in_range(ctx, indices, bound)
    if len(values.dims) == 2:
        scatter_axis = 1 if axis0 else 2
        index = _spread(ctx, index, values.dims, scatter_axis, INT)
        valid = _spread(ctx, valid, values.dims, scatter_axis, BOOL)
    else:
        scatter_axis = 1
    kept = ctx.emit("Where", [valid, values, ctx.const(np.float32(0), "zero")], values.dims)  # skipped: + 0
    zeros = ctx.emit("ConstantOfShape", [ctx.ints((ctx.batch, *out_dims), "shape")], out_dims,
                     {"value": np.zeros(1, np.float32)})
    return ctx.emit("ScatterElements", [zeros, index, kept], out_dims, {"axis": scatter_axis, "reduction": "add"},
                    final=final)


@importer("one_hot")
def _one_hot(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    size = int(params.size)
    if math.prod(x.dims) != 1 or size < 1:
        raise ShapeError(f"{ctx.where()}: one_hot takes one value per sample and size ≥ 1, got {list(x.dims)}, "
                         f"size {size}")
    index, valid = _index_in_range(ctx, x, size)
    hot = ctx.emit("OneHot", [index, ctx.ints([size], "depth"), ctx.const(np.array([0, 1], np.float32), "values")],
                   (*x.dims, size), {"axis": -1})
    mask = _float(ctx, valid, final=False)
    masked = ctx.emit("Mul", [hot, ctx.emit("Unsqueeze", [mask, ctx.ints([-1], "axes")], (*x.dims, 1))],
                      (*x.dims, size))
    return [ctx.emit("Reshape", [masked, ctx.ints((ctx.batch, size), "shape")], (size,), final=True)]


@importer("argmax", "argmin")
def _arg_extreme(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    if len(x.dims) != 1:
        raise ShapeError(f"{ctx.where()}: {layer.WhichOneof('layer_type')} takes a 1-D sample, got {list(x.dims)}")
    op = "ArgMax" if layer.WhichOneof("layer_type") == "argmax" else "ArgMin"
    index = ctx.emit(op, [x], (1,), {"axis": 1, "keepdims": 1}, dtype=INT)
    return [_float(ctx, index)]


def _centred(ctx: ImportContext, x: Tensor) -> Tensor:
    flat = _flat(ctx, x)
    mean = ctx.emit("ReduceMean", [flat, ctx.ints([1], "axes")], (1,), {"keepdims": 1})
    return ctx.emit("Sub", [flat, mean], flat.dims)


def _moment(ctx: ImportContext, a: Tensor, b: Tensor, biased: bool) -> list[Tensor]:
    """Σ (a − mean a)(b − mean b) / (n if biased else n − 1), per sample."""
    n = math.prod(a.dims)
    total = ctx.emit("ReduceSum", [ctx.emit("Mul", [_centred(ctx, a), _centred(ctx, b)], (n,)),
                                   ctx.ints([1], "axes")], (1,), {"keepdims": 1})
    divisor = ctx.const(np.float32(n if biased else n - 1), "divisor")
    return [ctx.emit("Div", [total, divisor], (1,), final=True)]


@importer("covariance")
def _covariance(ctx, layer, params, inputs):
    a, b = same_shapes(ctx, layer_inputs(ctx, inputs, 2))
    return _moment(ctx, a, b, params.biased)


@importer("variance")
def _variance(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    return _moment(ctx, x, x, params.biased)


@importer("batchwise_reduce_sum")
def _batchwise_reduce_sum(ctx, layer, params, inputs):
    """The sum over the mini-batch, given to every sample."""
    (x,) = layer_inputs(ctx, inputs)
    total = ctx.emit("ReduceSum", [x, ctx.ints([0], "axes")], x.dims, {"keepdims": 1})
    total.value.type = replace(total.value.type, shape=(1, *x.dims))  # one row, not a mini-batch
    return [ctx.emit("Expand", [total, ctx.ints((ctx.batch, *x.dims), "shape")], x.dims, final=True)]


@importer("mini_batch_index", "mini_batch_size")
def _mini_batch(ctx, layer, params, inputs):
    layer_inputs(ctx, inputs, 0)
    if layer.WhichOneof("layer_type") == "mini_batch_index":
        values = np.arange(ctx.batch, dtype=np.float32).reshape(ctx.batch, 1)
    else:
        values = np.full((ctx.batch, 1), ctx.batch, np.float32)
    return [ctx.emit("Identity", [ctx.const(values, "values")], (1,), final=True)]


@importer("upsample")
def _upsample(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    if params.upsample_mode not in ("nearest", ""):
        raise ShapeError(f"{ctx.where()}: upsample mode '{params.upsample_mode}' (LBANN knows 'nearest')")
    n = len(x.dims) - 1
    if params.num_dims and params.num_dims != n:
        raise ShapeError(f"{ctx.where()}: num_dims {params.num_dims} for a sample of {n} spatial dims")
    factors = [int(f) for f in params.scale_factors] if params.has_vectors or len(params.scale_factors) else \
        [int(params.scale_factors_i)] * n
    factors = factors * n if len(factors) == 1 else factors
    if len(factors) != n or min(factors, default=0) < 1:
        raise ShapeError(f"{ctx.where()}: scale factors {factors} for {n} spatial dims")
    dims = (x.dims[0], *(d * f for d, f in zip(x.dims[1:], factors)))
    scales = ctx.const(np.array([1, 1, *factors], np.float32), "scales")
    attrs = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    return [ctx.emit("Resize", [x, None, scales], dims, attrs, final=True)]


@importer("bilinear_resize")
def _bilinear_resize(ctx, layer, params, inputs):
    """The last two dims resized to height × width, sampled at (i + ½)·in/out − ½ and clamped at
    the borders (src/layers/image/bilinear_resize.cpp): ONNX's half-pixel linear Resize."""
    (x,) = layer_inputs(ctx, inputs)
    if len(x.dims) < 2 or params.height < 1 or params.width < 1:
        raise ShapeError(f"{ctx.where()}: resizes {list(x.dims)} to {params.height} x {params.width}; it needs "
                         f"a sample of at least 2 dims and a positive height and width")
    dims = (*x.dims[:-2], int(params.height), int(params.width))
    attrs = {"mode": "linear", "coordinate_transformation_mode": "half_pixel"}
    return [ctx.emit("Resize", [x, None, None, ctx.ints((ctx.batch, *dims), "sizes")], dims, attrs, final=True)]


@importer("unpooling")
def _unpooling(ctx, layer, params, inputs):
    """Max unpooling (src/layers/transform/unpooling.hpp; Era A names the pooling layer, Era C makes
    it the hint_layer): each value goes where its window's maximum was in the pooling layer's
    input, found as LBANN's CPU pooling finds it (windows over the zero-padded input, the first
    largest entry); a position several windows cover takes the largest of what they give it
    (0 from a window whose maximum lies elsewhere), a position none covers 0."""
    (x,) = layer_inputs(ctx, inputs)
    pool, (a,) = _paired_pooling(ctx, layer)
    ctx.hint = None  # the hint pairs the layers; the output has the pooling layer's input dims
    nd = len(a.dims) - 1
    if params.num_dims and params.num_dims != nd:
        raise ShapeError(f"{ctx.where()}: num_dims {params.num_dims} for a sample of {nd} spatial dims")
    kernel, pads, stride = pool_geometry(ctx, pool.pooling, nd)
    grid = tuple((d + 2 * p - k) // s + 1 for d, p, k, s in zip(a.dims[1:], pads, kernel, stride))
    if x.dims != (a.dims[0], *grid):
        raise ShapeError(f"{ctx.where()}: takes {list(x.dims)}, but its pooling layer '{pool.name}' gives "
                         f"{[a.dims[0], *grid]}")
    channels, padded = a.dims[0], tuple(d + 2 * p for d, p in zip(a.dims[1:], pads))
    axes = list(range(2, nd + 2))
    zero_pads = ctx.ints([0, 0, *pads, 0, 0, *pads], "pads")
    a_padded = ctx.emit("Pad", [a, zero_pads, ctx.const(np.float32(0), "zero")], (channels, *padded))
    offsets = list(itertools.product(*(range(k) for k in kernel)))
    windows = [ctx.emit("Slice", [a_padded, ctx.ints(o, "starts"),
                                  ctx.ints([oi + (g - 1) * s + 1 for oi, g, s in zip(o, grid, stride)], "ends"),
                                  ctx.ints(axes, "axes"), ctx.ints(stride, "steps")], x.dims) for o in offsets]
    largest = ctx.emit("Max", windows, x.dims) if len(windows) > 1 else windows[0]
    lowest = ctx.const(np.float32(-np.inf), "lowest")
    canvases, taken = [], None
    for o, window in zip(offsets, windows):
        hit = ctx.emit("Equal", [window, largest], x.dims, dtype=BOOL)
        first = hit if taken is None else ctx.emit("And", [hit, ctx.emit("Not", [taken], x.dims, dtype=BOOL)],
                                                    x.dims, dtype=BOOL)
        taken = hit if taken is None else ctx.emit("Or", [taken, hit], x.dims, dtype=BOOL)
        value = ctx.emit("Where", [first, x, ctx.const(np.float32(0), "zero")], x.dims)
        canvases.append(_placed(ctx, value, o, stride, padded, lowest))
    y = ctx.emit("Max", canvases, (channels, *padded)) if len(canvases) > 1 else canvases[0]
    y = ctx.emit("Slice", [y, ctx.ints(pads, "starts"), ctx.ints([p + d for p, d in zip(pads, a.dims[1:])], "ends"),
                           ctx.ints(axes, "axes")], a.dims)
    covered = np.zeros(padded, bool)
    for o in offsets:
        covered[tuple(slice(oi, oi + (g - 1) * s + 1, s) for oi, g, s in zip(o, grid, stride))] = True
    covered = covered[tuple(slice(p, p + d) for p, d in zip(pads, a.dims[1:]))]
    return [ctx.emit("Where", [ctx.const(covered.reshape(1, 1, *covered.shape), "covered"), y,
                               ctx.const(np.float32(0), "zero")], a.dims, final=True)]


def _paired_pooling(ctx: ImportContext, layer):
    """The max pooling layer an unpooling layer undoes (its hint_layer), and that layer's input."""
    pool, pool_inputs = ctx.imported.get(layer.hint_layer, (None, None))
    if pool is None or pool.WhichOneof("layer_type") != "pooling":
        raise FormatError(f"{ctx.where()}: unpooling needs the pooling layer it undoes as its hint_layer")
    if pool.pooling.pool_mode not in ("max", "max_deterministic"):
        raise FormatError(f"{ctx.where()}: its pooling layer '{pool.name}' is '{pool.pooling.pool_mode}' pooling; "
                          f"LBANN unpools max pooling only")
    return pool, pool_inputs


def _placed(ctx: ImportContext, value: Tensor, offset: Sequence[int], stride: Sequence[int],
            padded: Sequence[int], fill: Value) -> Tensor:
    """``value`` (C × grid) spread over the padded input: grid point g at g·stride + offset, ``fill``
    everywhere else."""
    channels, grid = value.dims[0], value.dims[1:]
    spaced = [g * s for g, s in zip(grid, stride)]
    if any(s > 1 for s in stride):  # each point followed by stride − 1 fills along every dim
        apart = tuple(d for g in grid for d in (g, 1))
        value = ctx.emit("Reshape", [value, ctx.ints((ctx.batch, channels, *apart), "apart")], (channels, *apart))
        after = [0, 0, *(d for s in stride for d in (0, s - 1))]
        grown = tuple(d for g, s in zip(grid, stride) for d in (g, s))
        value = ctx.emit("Pad", [value, ctx.ints([0] * len(after) + after, "pads"), fill], (channels, *grown))
        value = ctx.emit("Reshape", [value, ctx.ints((ctx.batch, channels, *spaced), "spaced")],
                         (channels, *spaced))
    before = list(offset)
    after = [max(0, p - o - w) for p, o, w in zip(padded, offset, spaced)]
    dims = tuple(o + w + e for o, w, e in zip(offset, spaced, after))
    value = ctx.emit("Pad", [value, ctx.ints([0, 0, *before, 0, 0, *after], "pads"), fill], (channels, *dims))
    if dims == tuple(padded):
        return value
    return ctx.emit("Slice", [value, ctx.ints([0] * len(padded), "starts"), ctx.ints(padded, "ends"),
                              ctx.ints(list(range(2, len(padded) + 2)), "axes")], (channels, *padded))


@importer("entrywise_batch_normalization")
def _entrywise_batch_normalization(ctx, layer, params, inputs):
    """Each entry normalized by its own running statistics at inference, y = (x − mean) /
    sqrt(var + ε), no scale or bias (src/layers/regularizers/entrywise_batch_normalization.cpp;
    LBANN's defaults: mean 0, variance 1, ε as given)."""
    (x,) = layer_inputs(ctx, inputs)
    n = math.prod(x.dims)
    mean = ctx.weights(0, "running_mean", n, default="zeros").reshape(1, *x.dims)
    var = ctx.weights(1, "running_variance", n, default="ones").reshape(1, *x.dims).astype(np.float64)
    std = np.sqrt(var + float(params.epsilon)).astype(np.float32)
    centred = ctx.emit("Sub", [x, ctx.const(mean, "running_mean", slot=0)], x.dims)
    return [ctx.emit("Div", [centred, ctx.const(std, "running_stdev")], x.dims, final=True)]


@importer("dist_embedding")
def _dist_embedding(ctx, layer, params, inputs):
    """The embedding LBANN shards over processes (NVSHMEM): at inference row ``index`` of the
    embedding_dim × num_embeddings table, like ``embedding`` without padding_idx."""
    (x,) = layer_inputs(ctx, inputs)
    n, d = int(params.num_embeddings), int(params.embedding_dim)
    table = ctx.weights(0, "weights", d, n, fans=(n, d)).T  # stored D × N
    return [embedding_lookup(ctx, x, table)]


@importer("identity_zero")
def _identity_zero(ctx, layer, params, inputs):
    """Its input, or zeros when the layer is frozen (``freeze: true``;
    src/layers/transform/identity_zero.cpp)."""
    (x,) = layer_inputs(ctx, inputs)
    if not layer.freeze:
        return [ctx.emit("Identity", [x], x.dims, final=True)]
    zeros = ctx.const(np.zeros((1, *x.dims), np.float32), "zeros")
    return [ctx.emit("Expand", [zeros, ctx.ints((ctx.batch, *x.dims), "shape")], x.dims, final=True)]


@importer("rowwise_weights_norms")
def _rowwise_weights_norms(ctx, layer, params, inputs):
    """The L2 norm of each row of its weights' matrix (one value per row, the same for every
    sample; src/layers/misc/rowwise_weights_norms.cpp). The matrix is the one another layer set
    up before it, as LBANN requires (a hint_layer orders them)."""
    layer_inputs(ctx, inputs, 0)
    names = list(layer.weights)
    if len(names) != 1:
        raise ShapeError(f"{ctx.where()}: rowwise_weights_norms takes one weights object, it names {len(names)}")
    matrix = ctx.matrix_of(names[0])
    if matrix is None:
        raise ShapeError(f"{ctx.where()}: its weights '{names[0]}' are not set up by a layer before it (LBANN "
                         f"needs one; a hint_layer orders them)")
    norms = np.sqrt(np.sum(np.square(matrix.astype(np.float32)), axis=1))
    return broadcast_constant(ctx, norms, norms.shape)


def _cross_grid(ctx, layer, inputs, what: str) -> tuple[Tensor, int]:
    """The sum of the parents, which LBANN's sub-grid parallelism holds on one grid each (the
    number of grids is the number of branches, parents and children alike)."""
    xs = same_shapes(ctx, layer_inputs(ctx, inputs, None))
    children = len(layer.children) or len(xs)
    if children != len(xs):
        raise ShapeError(f"{ctx.where()}: {what} has {len(xs)} parents and {children} children; each grid gives "
                         f"one and takes one")
    total = xs[0] if len(xs) == 1 else ctx.emit("Sum", xs, xs[0].dims)
    return total, len(xs)


@importer("cross_grid_sum")
def _cross_grid_sum(ctx, layer, params, inputs):
    """Every child gets the sum of every parent (an all-reduce over the sub-grids;
    src/layers/transform/cross_grid_sum.hpp)."""
    total, branches = _cross_grid(ctx, layer, inputs, "cross_grid_sum")
    return [ctx.emit("Identity", [total], total.dims, final=branches == 1) for _ in range(branches)]


@importer("cross_grid_sum_slice")
def _cross_grid_sum_slice(ctx, layer, params, inputs):
    """Child i gets the i-th of as many equal slices of the sum's last dim as there are grids
    (a reduce-scatter; src/layers/transform/cross_grid_sum_slice.hpp)."""
    total, branches = _cross_grid(ctx, layer, inputs, "cross_grid_sum_slice")
    last = total.dims[-1]
    if last % branches:
        raise ShapeError(f"{ctx.where()}: the last dim of {list(total.dims)} does not split into {branches} grids")
    width, axis = last // branches, len(total.dims)
    dims = (*total.dims[:-1], width)
    return [ctx.emit("Slice", [total, ctx.ints([i * width], "starts"), ctx.ints([(i + 1) * width], "ends"),
                               ctx.ints([axis], "axes")], dims, final=branches == 1) for i in range(branches)]


_MULTIDIM_MODES = {"": "ReduceSum", "sum": "ReduceSum", "add": "ReduceSum", "product": "ReduceProd",
                   "mul": "ReduceProd", "max": "ReduceMax", "maximum": "ReduceMax", "min": "ReduceMin",
                   "minimum": "ReduceMin"}


@importer("multidim_reduction")
def _multidim_reduction(ctx, layer, params, inputs):
    """Sum, product, max or min over the given sample axes, which leave the output
    (src/layers/transform/multidim_reduction.cpp)."""
    (x,) = layer_inputs(ctx, inputs)
    if params.mode not in _MULTIDIM_MODES:
        raise ShapeError(f"{ctx.where()}: multidim_reduction mode '{params.mode}' (LBANN knows sum, product, "
                         f"max, min)")
    axes = sorted(int(a) for a in params.axes)
    if len(set(axes)) != len(axes) or any(a >= len(x.dims) for a in axes):
        raise ShapeError(f"{ctx.where()}: axes {list(params.axes)} for a sample of {len(x.dims)} dims")
    dims = tuple(d for i, d in enumerate(x.dims) if i not in axes)
    if not axes:
        return [ctx.emit("Identity", [x], x.dims, final=True)]
    if not dims:
        raise ShapeError(f"{ctx.where()}: reduces every dim of {list(x.dims)}; LBANN leaves no output dims "
                         f"(use a reduction layer)")
    return [ctx.emit(_MULTIDIM_MODES[params.mode], [x, ctx.ints([a + 1 for a in axes], "axes")], dims,
                     {"keepdims": 0}, final=True)]


# -- losses and metrics (imported with lbann_training_layers) ------------------------------------

@importer("cross_entropy")
def _cross_entropy(ctx, layer, params, inputs):
    """−Σ ŷ log p over the entries with ŷ > 0; with ``use_labels`` ŷ is one-hot of an index per
    position (the label input holds class indices, one channel fewer)."""
    p, truth = layer_inputs(ctx, inputs, 2)
    if params.use_labels:
        channels = p.dims[0]
        index = ctx.emit("Cast", [truth], truth.dims, {"to": INT.onnx}, dtype=INT)
        spatial = p.dims[1:]
        index = ctx.emit("Reshape", [index, ctx.ints((ctx.batch, *spatial), "shape")], spatial, dtype=INT)
        truth = ctx.emit("OneHot", [index, ctx.ints([channels], "depth"),
                                    ctx.const(np.array([0, 1], np.float32), "values")], p.dims, {"axis": 1})
    else:
        p, truth = same_shapes(ctx, [p, truth])
    zero = ctx.const(np.float32(0), "zero")
    terms = ctx.emit("Where", [ctx.emit("Greater", [truth, zero], p.dims, dtype=BOOL),
                               ctx.emit("Neg", [ctx.emit("Mul", [truth, ctx.emit("Log", [p], p.dims)], p.dims)],
                                        p.dims), zero], p.dims)
    return [_per_sample(ctx, "ReduceSum", terms)]


@importer("mean_squared_error", "mean_absolute_error")
def _mean_error(ctx, layer, params, inputs):
    p, truth = same_shapes(ctx, layer_inputs(ctx, inputs, 2))
    diff = ctx.emit("Sub", [p, truth], p.dims)
    error = ctx.emit("Mul", [diff, diff], p.dims) if layer.WhichOneof("layer_type") == "mean_squared_error" \
        else ctx.emit("Abs", [diff], p.dims)
    return [_per_sample(ctx, "ReduceMean", error)]


@importer("l2_norm2", "l1_norm")
def _norm(ctx, layer, params, inputs):
    (x,) = layer_inputs(ctx, inputs)
    terms = ctx.emit("Mul", [x, x], x.dims) if layer.WhichOneof("layer_type") == "l2_norm2" else \
        ctx.emit("Abs", [x], x.dims)
    return [_per_sample(ctx, "ReduceSum", terms)]


@importer("categorical_accuracy")
def _categorical_accuracy(ctx, layer, params, inputs):
    """1 where the first largest prediction and the first largest label entry agree."""
    p, truth = same_shapes(ctx, layer_inputs(ctx, inputs, 2))
    picks = [ctx.emit("ArgMax", [_flat(ctx, t), ], (1,), {"axis": 1, "keepdims": 1}, dtype=INT) for t in (p, truth)]
    return [_float(ctx, ctx.emit("Equal", picks, (1,), dtype=BOOL))]


@importer("top_k_categorical_accuracy")
def _top_k_accuracy(ctx, layer, params, inputs):
    """1 where the label's class (its last positive entry) is among the k largest predictions
    (ties to the lower index); k < 1 gives 0, k ≥ classes gives 1 (LBANN's rules)."""
    p, truth = same_shapes(ctx, layer_inputs(ctx, inputs, 2))
    n, k = math.prod(p.dims), int(params.k)
    if k < 1 or k >= n:
        values = np.full((ctx.batch, 1), 0.0 if k < 1 else 1.0, np.float32)
        return [ctx.emit("Identity", [ctx.const(values, "values")], (1,), final=True)]
    positive = ctx.emit("Greater", [_flat(ctx, truth), ctx.const(np.float32(0), "zero")], (n,), dtype=BOOL)
    label = ctx.emit("ArgMax", [ctx.emit("Cast", [positive], (n,), {"to": INT.onnx}, dtype=INT)], (1,),
                     {"axis": 1, "keepdims": 1, "select_last_index": 1}, dtype=INT)
    _, top = ctx.emit_many("TopK", [_flat(ctx, p), ctx.ints([k], "k")], [((k,), FLOAT), ((k,), INT)],
                           {"axis": 1, "largest": 1, "sorted": 1})
    hit = ctx.emit("Equal", [top, label], (k,), dtype=BOOL)
    found = ctx.emit("ReduceMax", [ctx.emit("Cast", [hit], (k,), {"to": INT.onnx}, dtype=INT),
                                   ctx.ints([1], "axes")], (1,), {"keepdims": 1}, dtype=INT)
    any_label = ctx.emit("ReduceMax", [ctx.emit("Cast", [positive], (n,), {"to": INT.onnx}, dtype=INT),
                                       ctx.ints([1], "axes")], (1,), {"keepdims": 1}, dtype=INT)
    return [_float(ctx, ctx.emit("Mul", [found, any_label], (1,), dtype=INT))]
