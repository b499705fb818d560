"""SMAUG's rows of the decompositions table, judged by SMAUG's own runtime: the files nnbridge
writes for ops SMAUG lacks (HardSigmoid, HardSwish, a spatial ReduceMean) or computes with fixed
parameters when standalone (ReLU6's Clip(0, 6), LeakyRelu/Elu after an Add) run in the real
binary and compute what onnxruntime computes on the source model."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from real_smaug import as_onnx_layout, relative_error, run_smaug, stored_feeds

import nnbridge

RNG = np.random.default_rng(5)


def block(activation: str, **attrs) -> onnx.ModelProto:
    """Conv → Add(the input) → activation → Conv: the activation cannot fuse into the Add."""
    w1 = (RNG.standard_normal((4, 4, 3, 3)) * 0.5).astype(np.float32)
    w2 = (RNG.standard_normal((4, 4, 1, 1)) * 0.5).astype(np.float32)
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")]
    inputs = ["s"]
    if activation == "Clip":
        inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"),
                  numpy_helper.from_array(np.array(6, np.float32), "hi")]
        inputs += ["lo", "hi"]
    if activation == "ReduceMean":
        inits.append(numpy_helper.from_array(np.array([2, 3], np.int64), "axes"))
        inputs.append("axes")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "x"], ["s"]),
             helper.make_node(activation, inputs, ["a"], **attrs),
             helper.make_node("Conv", ["a", "w2"], ["y"])]
    out_hw = 1 if activation == "ReduceMean" else 6
    graph = helper.make_graph(nodes, activation, [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 4, 6, 6))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 4, out_hw, out_hw))], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


CASES = {"relu6": ("Clip", {}), "leaky-relu": ("LeakyRelu", {"alpha": 0.3}), "elu": ("Elu", {"alpha": 0.5}),
         "hard-sigmoid": ("HardSigmoid", {"alpha": 0.25, "beta": 0.4}), "hard-swish": ("HardSwish", {}),
         "spatial-mean": ("ReduceMean", {"keepdims": 1})}


@pytest.mark.parametrize("case", sorted(CASES))
def test_smaugs_runtime_computes_the_decomposed_op_as_onnxruntime_does(case, tmp_path):
    op, attrs = CASES[case]
    model = block(op, **attrs)
    x = (RNG.standard_normal((1, 4, 6, 6)) * 3).astype(np.float32)
    topo = tmp_path / "m_topo.pbtxt"
    nnbridge.convert(model, topo, smaug_backend="Reference", smaug_inputs={"x": x})
    run = run_smaug(topo)
    assert run.ok, f"the real runtime failed ({run.status}): {run.message}"
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, stored_feeds(topo, model))[0]
    assert relative_error(as_onnx_layout(run, expected), expected) <= 1e-5
