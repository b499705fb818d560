"""One compiled executable run from several threads at once gives each run its own answer.

onnxruntime's ``InferenceSession.run`` is reentrant and users expect the same of ``Executable.run``:
per-run values live in the run, never on objects the runs share (the plan's steps, a simulator's
report). Each model here is run by 4 threads that start together (a barrier), each on its own
input, and every result is compared bit for bit with the same input run alone.
"""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import nnbridge
from nnbridge.zoo import build

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
THREADS = 4
ROUNDS = 40


def _loop_branch(name: str, op: str):
    """An If branch holding a Loop: ``s = op(s, x0) + w`` 48 times from the outer ``final``,
    with ``x0`` and ``w`` read from the outer graph."""
    body = helper.make_graph(
        [helper.make_node(op, [f"{name}_in", "x0"], [f"{name}_x"]),
         helper.make_node("Add", [f"{name}_x", "w"], [f"{name}_out"]),
         helper.make_node("Identity", [f"{name}_c"], [f"{name}_c_out"])],
        f"{name}_body",
        [helper.make_tensor_value_info(f"{name}_i", I64, []), helper.make_tensor_value_info(f"{name}_c", B, []),
         helper.make_tensor_value_info(f"{name}_in", F, [3])],
        [helper.make_tensor_value_info(f"{name}_c_out", B, []), helper.make_tensor_value_info(f"{name}_out", F, [3])])
    return helper.make_graph([helper.make_node("Loop", ["more", "", "final"], [f"{name}_y"], body=body)], name, [],
                             [helper.make_tensor_value_info(f"{name}_y", F, [3])])


def _control_flow():
    """A Loop whose body reads outer-scope values (``x``, ``w``) and holds an If whose branches
    read them too, then an If on the loop's result with a Loop in each branch: every run's values
    differ, at every depth."""
    then = helper.make_graph([helper.make_node("Add", ["s_new", "w"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", F, [3])])
    other = helper.make_graph([helper.make_node("Sub", ["row", "s_new"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", F, [3])])
    body = helper.make_graph(
        [helper.make_node("Gather", ["x", "i"], ["row"], axis=0),
         helper.make_node("Mul", ["s_in", "row"], ["scaled"]),
         helper.make_node("Add", ["scaled", "w"], ["s_new"]),
         helper.make_node("ReduceSum", ["row"], ["total"], keepdims=0),
         helper.make_node("Greater", ["total", "zero"], ["positive"]),
         helper.make_node("If", ["positive"], ["s_out"], then_branch=then, else_branch=other),
         helper.make_node("Identity", ["c"], ["c_out"]),
         helper.make_node("Identity", ["s_out"], ["trace"])],
        "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("c", B, []),
         helper.make_tensor_value_info("s_in", F, [3])],
        [helper.make_tensor_value_info("c_out", B, []), helper.make_tensor_value_info("s_out", F, [3]),
         helper.make_tensor_value_info("trace", F, [3])])
    big, small = _loop_branch("big", "Add"), _loop_branch("small", "Sub")
    nodes = [
        helper.make_node("Loop", ["trips", "", "s0"], ["final", "traces"], body=body),
        helper.make_node("Gather", ["x", "first"], ["x0"], axis=0),
        helper.make_node("ReduceMax", ["final"], ["peak"], keepdims=0),
        helper.make_node("Greater", ["peak", "zero"], ["grew"]),
        helper.make_node("If", ["grew"], ["y"], then_branch=big, else_branch=small),
    ]
    inits = [numpy_helper.from_array(a, n) for n, a in [
        ("trips", np.array(4, np.int64)), ("more", np.array(48, np.int64)), ("s0", np.ones(3, np.float32)),
        ("zero", np.array(0, np.float32)),
        ("w", np.array([0.5, -0.25, 1.0], np.float32)), ("first", np.array(0, np.int64))]]
    graph = helper.make_graph(nodes, "control_flow", [helper.make_tensor_value_info("x", F, [4, 3])],
                              [helper.make_tensor_value_info("y", F, [3]),
                               helper.make_tensor_value_info("traces", F, [4, 3])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _scan():
    """An RNN written as a Scan: h = tanh(h @ W + x_t + m), with W and the run's mean input m
    outer-scope values."""
    body = helper.make_graph(
        [helper.make_node("MatMul", ["h_in", "W"], ["hw"]),
         helper.make_node("Add", ["hw", "x_t"], ["step"]),
         helper.make_node("Add", ["step", "m"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["h_out"]),
         helper.make_node("Identity", ["h_out"], ["h_t"])],
        "body",
        [helper.make_tensor_value_info("h_in", F, [2, 4]), helper.make_tensor_value_info("x_t", F, [2, 4])],
        [helper.make_tensor_value_info("h_out", F, [2, 4]), helper.make_tensor_value_info("h_t", F, [2, 4])])
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32) * 0.5, "W"),
             numpy_helper.from_array(np.zeros((2, 4), np.float32), "h0"),
             numpy_helper.from_array(np.array([0], np.int64), "time")]
    graph = helper.make_graph(
        [helper.make_node("ReduceMean", ["x", "time"], ["m"], keepdims=0),
         helper.make_node("Scan", ["h0", "x"], ["h", "hs"], body=body, num_scan_inputs=1)], "scan_rnn",
        [helper.make_tensor_value_info("x", F, [6, 2, 4])],
        [helper.make_tensor_value_info("h", F, [2, 4]), helper.make_tensor_value_info("hs", F, [6, 2, 4])],
        initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


MODELS = {"control_flow": _control_flow, "scan_rnn": _scan, "lstm": lambda: build("lstm_small"),
          "cnn": lambda: build("digits_cnn")}


def _feeds(exe, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {v.name: rng.standard_normal([int(d) for d in v.type.shape]).astype(v.type.dtype.numpy)
            for v in exe.graph.inputs}


@pytest.fixture
def fine_switching():
    """Threads switch every microsecond (Python's default is 5 ms): runs interleave step by step."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(before)


def _at_once(run, feeds: list[dict[str, np.ndarray]]) -> list[list]:
    """``run(feeds[k])`` on thread k, ROUNDS times, every round started together on all threads."""
    together = threading.Barrier(len(feeds), timeout=60)
    results: list[list] = [[] for _ in feeds]
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for _ in range(ROUNDS):
                together.wait()
                results[k].append(run(feeds[k]))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
            together.abort()

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(feeds))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


@pytest.mark.parametrize("backend", ["reference", "smv", "rdu"])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_one_executable_run_from_four_threads_matches_sequential_runs(model, backend, fine_switching):
    exe = nnbridge.compile(MODELS[model](), backend)
    feeds = [_feeds(exe, seed) for seed in range(THREADS)]
    alone = [exe.run(f) for f in feeds]
    for one, other in zip(alone, alone[1:]):  # the inputs give different answers: a mix-up shows
        assert any(not np.array_equal(one[k], other[k]) for k in one)
    for k, runs in enumerate(_at_once(exe.run, feeds)):
        for got in runs:
            assert list(got) == list(alone[k])
            for name, expected in alone[k].items():
                np.testing.assert_array_equal(got[name], expected, err_msg=f"thread {k}, output {name}")


def test_profiled_runs_from_four_threads_each_time_their_own_nodes(fine_switching):
    exe = nnbridge.compile(MODELS["control_flow"](), "reference", profile=True)
    feeds = [_feeds(exe, seed) for seed in range(THREADS)]
    nodes = [n.name for n in exe.graph.nodes]

    def run(f):
        exe.run(f)
        return exe.report  # the report of the run that just ended on this thread or a later one

    for runs in _at_once(run, feeds):
        for report in runs:
            assert [row["name"] for row in report.rows] == nodes


def test_an_smv_runs_report_keeps_its_own_notes_after_later_runs():
    graph = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], "softmax",
                              [helper.make_tensor_value_info("x", F, [2, 8])],
                              [helper.make_tensor_value_info("y", F, [2, 8])])
    exe = nnbridge.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), "smv")
    exe.run({"x": np.full((2, 8), 100, np.float32)})  # exp(100) overflows: SMV's softmax has no max shift
    overflowed = exe.report
    exe.run({"x": np.zeros((2, 8), np.float32)})
    assert "row maximum" in overflowed.rows[0]["deviation"]
    assert "deviation" not in exe.report.rows[0]
