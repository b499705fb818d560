"""A kernel's signature is its op's schema: attributes are keyword-only parameters, checked against
the schema when the kernel is registered, and bound once per node when a plan is built."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

import nnbridge
from nnbridge.base.errors import KernelError, RegistrationError, UnsupportedOpError
from nnbridge.ir import DType, Graph, OpSchema, TensorType, get_schema
from nnbridge.ir.schema import CUSTOM_SCHEMAS, register_schema
from nnbridge.kernels import KERNELS, Plan, get_kernel, kernel
from nnbridge.kernels.registry import REQUIRED, KernelSpec

DOMAIN = "com.example.signatures"
KERNEL_MODULES = Path(nnbridge.__file__).parent / "kernels" / "ops"


@pytest.fixture
def toy_op():
    """Toy(x) {axis: int = -1, alpha: float = 0.01, shape: ints, size: int (required)}, its float default
    as an AttributeProto holds it (float32), and a cleanup of any kernel."""
    alpha = float(np.float32(0.01))
    register_schema(OpSchema("Toy", DOMAIN, 1, 1, 1, 1, {"axis": -1, "alpha": alpha, "shape": None},
                             frozenset({"size"}), "a toy"))
    yield
    CUSTOM_SCHEMAS.unregister((DOMAIN, "Toy"))
    if (DOMAIN, "Toy") in KERNELS:
        KERNELS.unregister((DOMAIN, "Toy"))


def test_a_misspelt_attribute_keyword_fails_at_registration_naming_kernel_op_and_attribute(toy_op):
    with pytest.raises(RegistrationError) as caught:
        @kernel("Toy", domain=DOMAIN)
        def toy(ctx, x, *, axsi=-1, size):
            return x

    message = str(caught.value)
    assert f"kernel {__name__}." in message and "toy of com.example.signatures.Toy" in message
    assert "keyword 'axsi' is not an attribute of the op; did you mean 'axis'?" in message
    assert (DOMAIN, "Toy") not in KERNELS


def test_a_kernel_registered_for_several_ops_is_checked_against_each_and_registers_none_on_failure(toy_op):
    with pytest.raises(RegistrationError, match=r"toy of com.example.signatures.Softmax: the op has no schema"):
        @kernel("Toy", "Softmax", domain=DOMAIN)
        def toy(ctx, x, *, size):
            return x
    assert (DOMAIN, "Toy") not in KERNELS


@pytest.mark.parametrize("signature, complaint", [
    ("ctx, x, *, alpha=0.02, size", "attribute 'alpha' defaults to 0.02, the schema to 0.0099"),
    ("ctx, x, *, axis, size", "attribute 'axis' is optional in the schema; give its keyword the schema's default"),
    ("ctx, x, *, size=3", "attribute 'size' is required by the schema, so its keyword takes no default"),
    ("ctx, x, **attrs", "takes **attrs: name each attribute"),
])
def test_a_signature_that_disagrees_with_the_schema_fails_at_registration(toy_op, signature, complaint):
    scope: dict = {"__name__": __name__}
    exec(f"def toy({signature}):\n    return x", scope)  # noqa: S102 - a signature under test
    with pytest.raises(RegistrationError, match=re.escape(complaint)):
        kernel("Toy", domain=DOMAIN)(scope["toy"])
    assert (DOMAIN, "Toy") not in KERNELS


def test_a_check_is_held_to_the_schema_too(toy_op):
    def check(node, *, sise):
        return None

    with pytest.raises(RegistrationError, match=r"check .*check of com.example.signatures.Toy: keyword 'sise' .* "
                                                r"did you mean 'size'\?"):
        kernel("Toy", domain=DOMAIN, check=check)(lambda ctx, x: x)


def _toy_node(attrs: dict) -> tuple[Graph, object]:
    graph = Graph("toy")
    x = graph.add_input("x", TensorType(DType.FLOAT32, (2,)))
    node = graph.add_node("Toy", [x], attrs=attrs, domain=DOMAIN)
    graph.outputs.append(node.outputs[0])
    return graph, node


def test_defaults_bind_as_the_schema_states_them_unless_marked_with_a_reason(toy_op):
    @kernel("Toy", domain=DOMAIN)
    def toy(ctx, x, *, alpha=0.01, axis=-1, shape=(1, 2), size):
        return x

    spec = get_kernel("Toy", DOMAIN)
    # 0.01 and the float32 an AttributeProto holds agree; the binding is the schema's exact value,
    # the value kernels read before signatures existed; a default the schema lacks is the kernel's
    assert dict(spec.attrs) == {"alpha": 0.009999999776482582, "axis": -1, "shape": (1, 2), "size": REQUIRED}
    _, node = _toy_node({"size": 4, "axis": 0})
    assert spec.bind(node) == {"alpha": 0.009999999776482582, "axis": 0, "shape": (1, 2), "size": 4}
    KERNELS.unregister((DOMAIN, "Toy"))

    @kernel("Toy", domain=DOMAIN, own_defaults={"alpha": "the toy's paper says 0.02"})
    def toy_marked(ctx, x, *, alpha=0.02, size):
        return x

    assert get_kernel("Toy", DOMAIN).bind(node) == {"alpha": 0.02, "size": 4}
    KERNELS.unregister((DOMAIN, "Toy"))
    with pytest.raises(RegistrationError, match="own_defaults names beta, which neither it nor its check takes"):
        kernel("Toy", domain=DOMAIN, own_defaults={"beta": "no such keyword"})(toy)


def test_a_node_lacking_a_required_attribute_or_carrying_an_undefined_one_is_refused_by_name(toy_op):
    kernel("Toy", domain=DOMAIN)(lambda ctx, x, *, size: x)
    spec = get_kernel("Toy", DOMAIN)
    _, node = _toy_node({})
    assert spec.unsupported_reason(node) == "lacks its required attribute 'size'"
    _, node = _toy_node({"size": 1, "sise": 2})
    assert spec.unsupported_reason(node) == "attribute 'sise' is not defined for Toy at the IR opset 26"
    graph, _ = _toy_node({"size": 1, "sise": 2})
    with pytest.raises(KernelError, match=r"node 'toy' \(Toy\): attribute 'sise' is not defined"):
        Plan(graph)


def test_a_pre_opset_13_squeeze_axes_attribute_at_opset_26_is_refused_not_honoured_or_ignored():
    """It used to be honoured (squeezing axis 0 only) where onnxruntime refuses the file; ignoring it
    would squeeze every unit axis."""
    node = helper.make_node("Squeeze", ["x"], ["y"], axes=[0])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, [1, 3, 1])],
                              [helper.make_tensor_value_info("y", 1, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
    with pytest.raises(UnsupportedOpError, match="attribute 'axes' is not defined for Squeeze at the IR opset 26"):
        nnbridge.run(model, {"x": np.zeros((1, 3, 1), np.float32)}, backend="reference")


def _keywords(fn) -> dict[str, object]:
    return {p.name: p.default for p in inspect.signature(fn).parameters.values() if p.kind is p.KEYWORD_ONLY}


def test_every_registered_kernel_reads_only_attributes_its_ops_schema_defines():
    with_attributes = 0
    for (domain, op), spec in KERNELS.items():
        schema = get_schema(op, domain)
        assert schema is not None, f"{domain}.{op} has a kernel but no schema"
        defined = set(schema.attr_defaults) | schema.required_attrs
        for role, fn in (("kernel", spec.fn), ("check", spec.check)):
            keywords = _keywords(fn) if fn is not None else {}
            assert set(keywords) <= defined, f"{role} of {domain}.{op} reads {sorted(set(keywords) - defined)}"
            for name, given in keywords.items():
                assert (given is REQUIRED) == (name in schema.required_attrs), f"{role} of {op}: {name}"
        assert {name for name, _ in spec.attrs} == set(_keywords(spec.fn)), op
        with_attributes += bool(spec.attrs)
    assert with_attributes >= 120  # of 206 kernels; the rest have no attributes


def test_no_kernel_reads_its_own_attributes_by_string():
    """Attributes arrive as keywords; ``ctx.node`` is for the node's name and output count."""
    pattern = re.compile(r"ctx\.attr\(|ctx\.node\.attrs?\b")
    offenders = [f"{path.name}:{i}" for path in sorted(KERNEL_MODULES.glob("*.py"))
                 for i, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert not offenders, offenders


def test_attributes_are_bound_once_per_plan_not_per_run(monkeypatch):
    calls = []
    real = KernelSpec.bind
    monkeypatch.setattr(KernelSpec, "bind", lambda self, node: calls.append(node.name) or real(self, node))
    graph = Graph("g")
    x = graph.add_input("x", TensorType(DType.FLOAT32, (2, 3)))
    soft = graph.add_node("Softmax", [x], attrs={"axis": 0})
    graph.outputs.append(graph.add_node("LeakyRelu", [soft.outputs[0]]).outputs[0])
    plan = Plan(graph)
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    first = plan.execute(feeds)[0]
    for _ in range(3):
        np.testing.assert_array_equal(plan.execute(feeds)[0], first)
    assert len(calls) == 2
    e = np.exp(feeds["x"] - feeds["x"].max(axis=0))
    np.testing.assert_allclose(first, e / e.sum(axis=0), rtol=1e-6)  # axis 0 was read, not the default -1


_X = np.arange(12, dtype=np.float32).reshape(1, 3, 4, 1)


@pytest.mark.parametrize("op, opset, attrs, want", [
    ("Squeeze", 11, {"axes": [0]}, [_X[0]]),
    ("Unsqueeze", 11, {"axes": [0]}, [_X[None]]),
    ("ReduceSum", 11, {"axes": [1]}, [_X.sum(axis=1, keepdims=True)]),
    ("ReduceMean", 13, {"axes": [1], "keepdims": 0}, [_X.mean(axis=1)]),
    ("Split", 11, {"axis": 1, "split": [1, 2]}, [_X[:, :1], _X[:, 1:]]),
    ("Split", 1, {"axis": 1, "split": [1, 2]}, [_X[:, :1], _X[:, 1:]]),
    ("Pad", 2, {"pads": [0, 1, 0, 0, 0, 1, 0, 0], "value": 5.0},
     [np.pad(_X, [(0, 0), (1, 1), (0, 0), (0, 0)], constant_values=5.0)]),
    ("Slice", 9, {"starts": [1], "ends": [3], "axes": [1]}, [_X[:, 1:3]]),
])
def test_attributes_older_opsets_had_reach_the_kernels_as_inputs(op, opset, attrs, want):
    """The kernels no longer read these attributes: the loader turns them into inputs (opset upgrade)."""
    outs = [f"y{i}" for i in range(len(want))]
    graph = helper.make_graph([helper.make_node(op, ["x"], outs, **attrs)], "g",
                              [helper.make_tensor_value_info("x", 1, list(_X.shape))],
                              [helper.make_tensor_value_info(o, 1, None) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    node = next(n for n in nnbridge.load(model).nodes if n.op == op)
    assert not set(node.attrs) & {"axes", "split", "pads", "value", "starts", "ends"}
    got = nnbridge.run(model, {"x": _X}, backend="reference", opt_level=0)
    for name, expected in zip(outs, want):
        np.testing.assert_array_equal(got[name], expected)


def test_a_kernel_failing_between_others_is_named_on_the_fast_and_the_watched_run(toy_op):
    """The plan runs as one generated function; a kernel's own exception is traced to its step's
    node, the one the step-by-step (profiled) run names, and the next run still works."""
    @kernel("Toy", domain=DOMAIN)
    def toy(ctx, x, *, alpha=0.01, axis=-1, shape=None, size):
        if x[0] < 0:
            raise ValueError("a negative first value")
        return x + size

    graph = Graph("toy")
    x = graph.add_input("x", TensorType(DType.FLOAT32, (2,)))
    first = graph.add_node("Neg", [x], name="first")
    picks = graph.add_node("Toy", [first.outputs[0]], attrs={"size": 1}, domain=DOMAIN, name="picks")
    graph.outputs.append(graph.add_node("Abs", [picks.outputs[0]], name="last").outputs[0])
    plan = Plan(graph)
    for watched in (None, []):
        np.testing.assert_array_equal(plan.execute({"x": np.float32([-1, 2])}, timings=watched)[0], [2, 1])
        with pytest.raises(KernelError, match=r"node 'picks' \(Toy\) failed: ValueError: a negative first value"):
            plan.execute({"x": np.float32([1, 2])}, timings=watched)
