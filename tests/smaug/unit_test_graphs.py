"""The graphs SMAUG's own unit tests build, rebuilt with ``nnbridge.smaug`` (the drop-in frontend).

**Upstream.** harvard-acc/smaug at commit ``8fd68e61cf4a926214f738a6347919ed587b79c4`` (BSD-3-Clause),
the Python unit tests under ``smaug/python/``: ``ops/activation_ops_test.py``,
``ops/control_flow_ops_test.py``, ``ops/data_op_test.py``, ``ops/fp_precision_test.py``,
``ops/ops_test.py``, ``ops/recurrent_test.py``, ``ops/attention_test.py``, ``subgraph_test.py``,
``tensor_test.py`` and ``unique_name_test.py``. Each builder below is keyed ``<file>::<test>`` and
builds, with the same frontend calls in the same order, the graph that test builds (ops, names,
shapes, layouts, backends, dtypes; tensors made inside or outside ``with Graph`` as there). Written
for these tests from those facts; no upstream code is copied. Values: SMAUG's tests draw unseeded
``np.random.rand`` (or TensorFlow's normal(0, 0.01)); here a seeded generator stands in.

SMAUG's C++ core tests read files rather than build them: ``core/network_test.cpp`` reads the
experiments' models (``tests/smaug/builders``) and ``core/tensor_test.cpp`` the three
``python/test_inputs/fp16_*`` pairs, copied in ``unit_test_inputs/``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import nnbridge.smaug as sg
from nnbridge.smaug import control_flow, math, nn, tensor

#: each backend's dtype in SMAUG's tests (global_vars.backend_datatype)
DTYPE = {"Reference": np.float32, "SMV": np.float16}

BUILDERS: dict[str, Callable[[], sg.Graph]] = {}


def builds(key: str):
    def register(fn):
        BUILDERS[key] = fn
        return fn
    return register


def rand(*shape, dtype=np.float16, seed: int = 0) -> np.ndarray:
    return np.random.RandomState(seed).rand(*shape).astype(dtype)


def normal(*shape, scale: float = 0.01, seed: int = 0) -> np.ndarray:
    """fp16 normal values: TensorFlow's random_normal_initializer(0, 0.01) of fp_precision_test, or (scale
    1) the tf.random.normal inputs of recurrent_test."""
    return (np.random.RandomState(seed).standard_normal(shape) * scale).astype(np.float16)


# -- ops/activation_ops_test.py (SMV) ------------------------------------------------------------
@builds("ops/activation_ops_test.py::test_activation_functions")
def activation_functions() -> sg.Graph:
    with sg.Graph("test_graph", "SMV") as g:
        act = sg.input_data(sg.Tensor(data_layout=sg.NHWC, tensor_data=rand(2, 32, 32, 32)), "input")
        act = nn.relu(act, "relu")
        act = nn.lrelu(act, slope=0.5, name="lrelu")
        act = nn.elu(act, alpha=0.2, name="elu")
        act = nn.selu(act, alpha=0.4, lambda_param=0.8, name="selu")
        act = nn.tanh(act, "tanh")
        act = nn.hard_tanh(act, min=-1.5, max=1.5, name="hard_tanh")
        act = nn.sigmoid(act, "sigmoid")
        act = tensor.reorder(act, target_layout=sg.NC, name="reorder")
        nn.softmax(act, "softmax")
    return g


@builds("ops/activation_ops_test.py::test_fusing_activation_functions")
def fusing_activation_functions() -> sg.Graph:
    with sg.Graph("test_graph", "SMV") as g:
        x = sg.Tensor(data_layout=sg.NHWC, tensor_data=rand(2, 32, 32, 32, seed=1))
        w = sg.Tensor(data_layout=sg.NHWC, tensor_data=rand(32, 3, 3, 32, seed=2))
        fc = sg.Tensor(data_layout=sg.NC, tensor_data=rand(10, 32768, seed=3))
        stats = [sg.Tensor(data_layout=sg.NC, tensor_data=rand(1, 64, seed=4 + i)) for i in range(4)]
        act = sg.input_data(x, "input")
        for activation in (None, "relu", "lrelu", "elu", "selu", "tanh", "hard_tanh", "sigmoid", "softmax"):
            act = nn.convolution(act, w, stride=[1, 1], padding="same", activation=activation,
                                 name=f"conv_{activation or 'none'}")
        act = nn.batch_norm(act, *stats, activation="relu", name="bn_relu")
        nn.mat_mul(act, fc, activation="relu", name="fc_relu")
        nn.mat_mul(act, fc, activation="lrelu", activation_params={"slope": 0.1}, name="fc_lrelu")
        nn.mat_mul(act, fc, activation="elu", activation_params={"alpha": 0.3}, name="fc_elu")
        nn.mat_mul(act, fc, activation="selu", activation_params={"alpha": 1.0, "lambda_param": 1.0}, name="fc_selu")
        nn.mat_mul(act, fc, activation="hard_tanh", activation_params={"min": -2.0, "max": 2.0},
                   name="fc_hard_tanh")
    return g


# -- ops/control_flow_ops_test.py (SmaugTest: SMV, float16) --------------------------------------
def _n(value, dtype=np.float16) -> sg.Tensor:
    return sg.Tensor(data_layout=sg.N, tensor_data=np.array([value], dtype=dtype))


@builds("ops/control_flow_ops_test.py::test_cond_op_simple_func")
def cond_simple() -> sg.Graph:
    with sg.Graph(name="test_graph", backend="SMV") as g:
        x0, x1, y, z = _n(2), _n(5), _n(10), _n(20)
        control_flow.cond(math.less(x0, x1), lambda: math.add(y, z), lambda: math.mul(y, z))
    return g


@builds("ops/control_flow_ops_test.py::test_cond_op_func_call")
def cond_func_call() -> sg.Graph:
    def func(a, b):
        return math.add(a, math.mul(b, _n(-3)))

    with sg.Graph(name="test_graph", backend="SMV") as g:
        x0, x1, y, z = _n(2), _n(5), _n(10), _n(20)
        control_flow.cond(math.less(x0, x1), lambda: func(y, z), lambda: math.mul(y, z))
    return g


def _func_false(a, b):
    two = _n(2)
    return control_flow.cond(math.greater(a, b), lambda: math.mul(a, two), lambda: math.mul(b, two))


@builds("ops/control_flow_ops_test.py::test_nested_cond_ops")
def cond_nested() -> sg.Graph:
    def func_true(a, b):
        minus_one = _n(-1)
        return control_flow.cond(math.less(a, b), lambda: math.add(a, math.mul(b, minus_one)),
                                  lambda: math.add(a, b))

    with sg.Graph(name="test_graph", backend="SMV") as g:
        x0, x1, y, z = _n(2), _n(5), _n(10), _n(20)
        control_flow.cond(math.greater(x0, x1), lambda: func_true(y, z), lambda: _func_false(y, z))
    return g


@builds("ops/control_flow_ops_test.py::test_use_nested_op_result")
def cond_use_nested_result() -> sg.Graph:
    def func_true(a, b):
        minus_one = _n(-1)
        res = control_flow.cond(math.less(a, b), lambda: math.add(a, math.mul(b, minus_one)),
                                lambda: math.add(a, b))[0]
        return math.mul(res, res)

    with sg.Graph(name="test_graph", backend="SMV") as g:
        x0, x1, y, z = _n(2), _n(5), _n(10), _n(20)
        control_flow.cond(math.less(x0, x1), lambda: func_true(y, z), lambda: _func_false(y, z))
    return g


# -- ops/data_op_test.py (Reference; np.array([1]) is Int64) -------------------------------------
def _one() -> sg.Tensor:
    return sg.Tensor(data_layout=sg.N, tensor_data=np.array([1]))


@builds("ops/data_op_test.py::test_auto_data_op")
def auto_data_op() -> sg.Graph:
    with sg.Graph("test_graph", "Reference") as g:
        math.add(_one(), _one())
    return g


@builds("ops/data_op_test.py::test_no_extra_data_op")
def no_extra_data_op() -> sg.Graph:
    with sg.Graph("test_graph", "Reference") as g:
        x = _one()
        math.add(sg.input_data(x), x)
    return g


@builds("ops/data_op_test.py::test_use_existing_data_op")
def use_existing_data_op() -> sg.Graph:
    with sg.Graph("test_graph", "Reference") as g:
        x, y = _one(), _one()
        sg.input_data(x)
        math.add(x, y)
    return g


@builds("ops/data_op_test.py::test_shared_data_op")
def shared_data_op() -> sg.Graph:
    with sg.Graph("test_graph", "Reference") as g:
        x, y = _one(), _one()
        res = math.add(x, y)
        math.mul(x, res)
    return g


@builds("ops/data_op_test.py::test_use_existing_data_op_in_subgraph")
def data_op_in_subgraph() -> sg.Graph:
    with sg.Graph("test_graph", "Reference") as g:
        x, y = _one(), _one()
        with sg.Graph("test_graph_subgraph", "Reference"):
            math.mul(x, y)
        math.add(x, y)
    return g


@builds("ops/data_op_test.py::test_use_existing_data_op_in_parent_graph")
def data_op_in_parent_graph() -> sg.Graph:
    with sg.Graph("test_graph", "Reference") as g:
        x, y = _one(), _one()
        math.mul(x, y)
        with sg.Graph("test_graph_subgraph", "Reference"):
            math.add(x, y)
    return g


# -- ops/fp_precision_test.py (SmaugTest: SMV; tensors made outside the graph) ------------------
@builds("ops/fp_precision_test.py::test_mat_mul")
def fp_mat_mul() -> sg.Graph:
    a = sg.Tensor(data_layout=sg.NC, tensor_data=normal(4, 32, seed=1))
    b = sg.Tensor(data_layout=sg.NC, tensor_data=normal(128, 32, seed=2))
    with sg.Graph(name="test_graph", backend="SMV") as g:
        nn.mat_mul(a, b)
    return g


@builds("ops/fp_precision_test.py::test_convolution")
def fp_convolution() -> sg.Graph:
    inputs = sg.Tensor(data_layout=sg.NHWC, tensor_data=normal(4, 8, 8, 32, seed=1))
    filters = sg.Tensor(data_layout=sg.NHWC, tensor_data=np.transpose(normal(3, 3, 32, 128, seed=2), (3, 0, 1, 2)))
    with sg.Graph(name="test_graph", backend="SMV") as g:
        nn.convolution(inputs, filters, stride=[1, 1], padding="same")
    return g


def _fp_binary(op) -> sg.Graph:
    a = sg.Tensor(data_layout=sg.NC, tensor_data=normal(4, 32, seed=1))
    b = sg.Tensor(data_layout=sg.NC, tensor_data=normal(4, 32, seed=2))
    with sg.Graph(name="test_graph", backend="SMV") as g:
        op(a, b)
    return g


BUILDERS["ops/fp_precision_test.py::test_add"] = lambda: _fp_binary(math.add)
BUILDERS["ops/fp_precision_test.py::test_mul"] = lambda: _fp_binary(math.mul)


# -- ops/ops_test.py: the sequential and residual graphs, on both backends ------------------------
def sequential_graph(backend: str) -> sg.Graph:
    dt = DTYPE[backend]
    with sg.Graph(name="test_sequential_graph", backend=backend) as g:
        x = sg.Tensor(data_layout=sg.NCHW, tensor_data=rand(1, 3, 28, 28, dtype=dt, seed=1))
        f0 = sg.Tensor(data_layout=sg.NCHW, tensor_data=rand(64, 3, 3, 3, dtype=dt, seed=2))
        f1 = sg.Tensor(data_layout=sg.NCHW, tensor_data=rand(64, 64, 3, 3, dtype=dt, seed=3))
        w0 = sg.Tensor(data_layout=sg.NC, tensor_data=rand(254, 12544, dtype=dt, seed=4))
        w1 = sg.Tensor(data_layout=sg.NC, tensor_data=rand(10, 254, dtype=dt, seed=5))
        stats = [sg.Tensor(data_layout=sg.NC, tensor_data=rand(1, 64, dtype=dt, seed=6 + i)) for i in range(4)]
        out = sg.input_data(x, "input")
        out = nn.convolution(out, f0, stride=[1, 1], padding="same", name="conv0")
        out = nn.relu(out, "conv0_relu")
        out = nn.batch_norm(out, *stats, name="bn")
        out = nn.convolution(out, f1, stride=[1, 1], padding="same", name="conv1")
        out = nn.relu(out, "conv1_relu")
        out = nn.max_pool(out, pool_size=[2, 2], stride=[2, 2], name="pool")
        out = tensor.flatten(out, "flatten")
        out = nn.mat_mul(out, w0, name="fc0")
        out = nn.relu(out, "fc0_relu")
        out = nn.mat_mul(out, w1, name="fc1")
        out = tensor.expand_dims(out, 1, "expand_dims")
        out = tensor.squeeze(out, 1, "squeeze")
        out = tensor.reshape(out, [2, 5], sg.NC, "reshape")
        out = tensor.repeat(out, [4, 2], "repeat")
        out = tensor.stack(out, 4, 1, "stack")
        out0, _, _, _ = tensor.unstack(out, 1, "unstack")
        out0 = tensor.reshape(out0, [1, 1, 8, 10], sg.NCHW, "reshape")
        tensor.padding(out0, [0, 0, 0, 0, 1, 1, 1, 1], "padding")
    return g


def residual_graph(backend: str) -> sg.Graph:
    dt = DTYPE[backend]
    with sg.Graph(name="test_residual_graph", backend=backend) as g:
        x = sg.Tensor(data_layout=sg.NCHW, tensor_data=rand(1, 1, 28, 28, dtype=dt, seed=1))
        f0 = sg.Tensor(data_layout=sg.NCHW, tensor_data=rand(64, 1, 3, 3, dtype=dt, seed=2))
        f1 = sg.Tensor(data_layout=sg.NCHW, tensor_data=rand(64, 1, 3, 3, dtype=dt, seed=3))
        f2 = sg.Tensor(data_layout=sg.NCHW, tensor_data=rand(64, 64, 3, 3, dtype=dt, seed=4))
        stats = [sg.Tensor(data_layout=sg.NC, tensor_data=rand(1, 64, dtype=dt, seed=5 + i)) for i in range(4)]
        act = sg.input_data(x, "input")
        x = nn.convolution(act, f0, stride=[1, 1], padding="same", name="conv0")
        out = nn.convolution(act, f1, stride=[1, 1], padding="same", name="conv1")
        out = nn.batch_norm(out, *stats, name="bn")
        out = nn.relu(out, "relu")
        out = nn.convolution(out, f2, stride=[1, 1], padding="same", name="conv2")
        out = math.add(x, out, "add")
        out = math.mul(x, out, "mul")
        axis = 1 if out.shape.layout == sg.NCHW else 3
        out = tensor.concat([x, out], axis, "concat")
        out0, out1, out2, out3 = tensor.split(out, 4, axis, "split")
        math.mul(math.add(out0, out1, "add1"), math.add(out2, out3, "add2"), "mul1")
    return g


for _backend, _class in (("SMV", "SMV"), ("Reference", "Ref")):
    BUILDERS[f"ops/ops_test.py::{_class}SequentialGraphTest"] = lambda b=_backend: sequential_graph(b)
    BUILDERS[f"ops/ops_test.py::{_class}ResidualGraphTest"] = lambda b=_backend: residual_graph(b)


# -- ops/recurrent_test.py (SmaugTest: SMV; TF's weights transposed to NC, made outside the graph) ---
def _nc(*shape, seed: int) -> sg.Tensor:
    return sg.Tensor(data_layout=sg.NC, tensor_data=normal(*shape, scale=0.1, seed=seed))


@builds("ops/recurrent_test.py::test_lstm_cell")
def lstm_cell() -> sg.Graph:
    inputs = sg.Tensor(data_layout=sg.NTC, tensor_data=normal(2, 4, 32, scale=1))
    w, u = _nc(128, 32, seed=1), _nc(128, 32, seed=2)
    with sg.Graph(name="test_graph", backend="SMV") as g:
        nn.LSTM([w, u])(sg.input_data(inputs))
    return g


@builds("ops/recurrent_test.py::test_multilayered_lstm")
def multilayered_lstm() -> sg.Graph:
    inputs = sg.Tensor(data_layout=sg.NTC, tensor_data=normal(4, 8, 16, scale=1))
    w0, u0, w1, u1 = _nc(128, 16, seed=1), _nc(128, 32, seed=2), _nc(128, 32, seed=3), _nc(128, 32, seed=4)
    with sg.Graph(name="test_graph", backend="SMV") as g:
        x = sg.input_data(inputs)
        lstm0, lstm1 = nn.LSTM([w0, u0]), nn.LSTM([w1, u1])
        outputs, _ = lstm0(x)
        lstm1(outputs)
    return g


@builds("ops/recurrent_test.py::test_bidirectional_lstm")
def bidirectional_lstm() -> sg.Graph:
    inputs = sg.Tensor(data_layout=sg.NTC, tensor_data=normal(1, 8, 32, scale=1))
    fwd = [_nc(128, 32, seed=1), _nc(128, 32, seed=2)]
    bwd = [_nc(128, 32, seed=3), _nc(128, 32, seed=4)]
    with sg.Graph(name="test_graph", backend="SMV") as g:
        nn.BidirectionalLSTM(fwd, bwd)(sg.input_data(inputs))
    return g


# -- ops/attention_test.py (SmaugTest: SMV; TF's weights transposed to NC, made outside the graph) ---
@builds("ops/attention_test.py::test_bahdanau_attention")
def bahdanau_attention() -> sg.Graph:
    batch, units, timestep = 2, 32, 8
    query = sg.Tensor(data_layout=sg.NC, tensor_data=normal(batch, units, scale=1, seed=1))
    w, u = _nc(4 * units, 2 * units, seed=2), _nc(4 * units, units, seed=3)  # the cell reads [query, attention]
    memory = sg.Tensor(data_layout=sg.NTC, tensor_data=normal(batch, timestep, units, scale=1, seed=4))
    w_alignment, w_decoder, w_encoder = _nc(1, units, seed=5), _nc(units, units, seed=6), _nc(units, units, seed=7)
    with sg.Graph(name="test_graph", backend="SMV") as g:
        cell = nn.LSTM([w, u])
        attention = nn.BahdanauAttention(memory, w_encoder, w_decoder, w_alignment)
        initial = sg.Tensor(data_layout=sg.NC, tensor_data=np.zeros((batch, units), np.float16))
        out, _ = cell.step(tensor.concat([query, initial], axis=1), timestep=0)
        attention(out)
    return g


# -- subgraph_test.py and unique_name_test.py (Reference; x, y: N [4] float32) ------------------
def _xy() -> tuple[sg.Tensor, sg.Tensor]:
    return (sg.Tensor(data_layout=sg.N, tensor_data=rand(4, dtype=np.float32, seed=1)),
            sg.Tensor(data_layout=sg.N, tensor_data=rand(4, dtype=np.float32, seed=2)))


@builds("subgraph_test.py::test_subgraph_merge")
def subgraph_merge() -> sg.Graph:
    x, y = _xy()
    with sg.Graph("parent_graph", "Reference") as g:
        with sg.Graph("child_graph", "Reference"):
            z = math.add(x, y, name="add")
            math.add(z, z, name="add_1")
    return g


@builds("subgraph_test.py::test_child_use_parent_outputs")
def child_use_parent_outputs() -> sg.Graph:
    x, y = _xy()
    with sg.Graph("parent_graph", "Reference") as g:
        z = math.add(x, y, name="add")
        w = math.add(z, z, name="add_1")
        with sg.Graph("child_graph", "Reference"):
            u = math.mul(z, z, name="mul")
            math.mul(w, u, name="mul_1")
    return g


@builds("subgraph_test.py::test_parent_use_child_outputs")
def parent_use_child_outputs() -> sg.Graph:
    x, y = _xy()
    with sg.Graph("parent_graph", "Reference") as g:
        with sg.Graph("child_graph", "Reference"):
            z = math.add(x, y, name="add")
            w = math.add(z, z, name="add_1")
        u = math.mul(z, z, name="mul")
        math.mul(w, u, name="mul_1")
    return g


@builds("subgraph_test.py::test_nested_subgraphs")
def nested_subgraphs() -> sg.Graph:
    x, y = _xy()
    with sg.Graph("parent_graph", "Reference") as g:
        z = math.add(x, y, name="add")
        with sg.Graph("child_graph", "Reference"):
            w = math.add(z, z, name="add_1")
            with sg.Graph("grandchild_graph", "Reference"):
                math.add(z, w, name="add_2")
    return g


@builds("unique_name_test.py::test_default_names")
def default_names() -> sg.Graph:
    x, y = _xy()
    with sg.Graph("test_graph", "Reference") as g:
        math.mul(x, math.add(x, y))
    return g


@builds("unique_name_test.py::test_auto_unique_names")
def auto_unique_names() -> sg.Graph:
    x, y = _xy()
    with sg.Graph("test_graph", "Reference") as g:
        res = math.add(x, y)
        res = math.add(res, res)
        math.add(res, res)
    return g


@builds("unique_name_test.py::test_user_supplied_names0")
def user_supplied_names0() -> sg.Graph:
    x, y = _xy()
    with sg.Graph("test_graph", "Reference") as g:
        res = math.add(x, y, name="add")
        math.mul(res, res, name="mul")
    return g


def _three_adds(second: str, third: str) -> sg.Graph:
    x, y = _xy()
    with sg.Graph("test_graph", "Reference") as g:
        res = math.add(x, y, name="add")
        res = math.add(res, res, name=second)
        math.add(res, res, name=third)
    return g


# unique_name_test.py defines test_user_supplied_names1 twice; the second definition is the one that runs
BUILDERS["unique_name_test.py::test_user_supplied_names1"] = lambda: _three_adds("add_3", "add")
BUILDERS["unique_name_test.py::test_user_supplied_names2"] = lambda: _three_adds("add_1", "add_1")


# -- tensor_test.py: lone Data nodes (the fp16 ones on a Reference graph) -------------------------
def _lone(backend: str, data: np.ndarray, layout: int | None) -> sg.Graph:
    with sg.Graph("test_graph", backend) as g:
        t = sg.Tensor(tensor_data=data) if layout is None else sg.Tensor(data_layout=layout, tensor_data=data)
        sg.input_data(t, "input")
    return g


BUILDERS["tensor_test.py::test_attr_reference"] = lambda: _lone("Reference", rand(2, 2, 4, 4, dtype=np.float32),
                                                                sg.NHWC)
BUILDERS["tensor_test.py::test_attr_smv_no_padding"] = lambda: _lone("SMV", rand(2, 2, 4, 8), sg.NCHW)
BUILDERS["tensor_test.py::test_attr_smv_padding"] = lambda: _lone(
    "SMV", np.array([[1.1, 2.2, 3.3, 4.4], [5.5, 6.6, 7.7, 8.8]], np.float16), sg.NCHW)
BUILDERS["tensor_test.py::test_fp16_even"] = lambda: _lone("Reference", rand(4, 2), None)
BUILDERS["tensor_test.py::test_fp16_odd"] = lambda: _lone("Reference", rand(4, 3), None)
BUILDERS["tensor_test.py::test_fp16_odd_odd"] = lambda: _lone("Reference", rand(3, 3), None)
