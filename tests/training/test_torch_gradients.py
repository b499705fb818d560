"""Whole-model gradients of the training step against torch autograd (float32, relative error
≤ 1e-5 per parameter): an MLP, a small CNN (conv, batch norm in training mode, pooling) and a
2-layer transformer encoder written in plain torch ops."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the optional extra; make test / .ci/run install it

import nnbridge  # noqa: E402
from nnbridge.training import TrainingStep  # noqa: E402


class Encoder(torch.nn.Module):
    """Two pre-norm encoder layers: self-attention (2 heads) and a GELU feed-forward, then a head."""

    def __init__(self, width=16, heads=2, layers=2, classes=5):
        super().__init__()
        self.heads = heads
        self.blocks = torch.nn.ModuleList(torch.nn.ModuleDict({
            "norm1": torch.nn.LayerNorm(width), "qkv": torch.nn.Linear(width, 3 * width),
            "proj": torch.nn.Linear(width, width), "norm2": torch.nn.LayerNorm(width),
            "up": torch.nn.Linear(width, 2 * width), "down": torch.nn.Linear(2 * width, width)}) for _ in range(layers))
        self.head = torch.nn.Linear(width, classes)

    def forward(self, x):
        n, t, w = x.shape
        d = w // self.heads
        for b in self.blocks:
            q, k, v = b["qkv"](b["norm1"](x)).split(w, dim=-1)
            q, k, v = (z.reshape(n, t, self.heads, d).transpose(1, 2) for z in (q, k, v))
            attn = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d), dim=-1)
            x = x + b["proj"]((attn @ v).transpose(1, 2).reshape(n, t, w))
            x = x + b["down"](torch.nn.functional.gelu(b["up"](b["norm2"](x))))
        return self.head(x.mean(dim=1))


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16), torch.nn.Tanh(),
                               torch.nn.Linear(16, 5)), (8, 12)


def _cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2), torch.nn.ReLU(), torch.nn.AvgPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(16 * 2 * 2, 5)), (8, 3, 16, 16)


def _transformer():
    return Encoder(), (8, 6, 16)


class NormsAndGather(torch.nn.Module):
    """LocalResponseNorm, affine InstanceNorm and torch.gather (an index read twice) on one path.
    torch exports its LRN as primitives with the channel window's squeeze behind an If on the batch
    dim: the training graph must fold that If, or autodiff would not see the LRN's denominator."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 6, 3, padding=1)
        self.lrn = torch.nn.LocalResponseNorm(3, alpha=0.3, beta=0.7, k=1.5)
        self.norm = torch.nn.InstanceNorm2d(6, affine=True)
        self.head = torch.nn.Linear(4 * 3, 5)
        self.register_buffer("index", torch.tensor([[0, 5, 5], [1, 1, 2], [3, 4, 0], [2, 2, 5]]).repeat(8, 1, 1))

    def forward(self, x):
        x = torch.tanh(self.norm(self.lrn(self.conv(x))))
        pooled = x.mean(dim=(2, 3)).reshape(-1, 1, 6).expand(-1, 4, 6)
        return self.head(torch.gather(pooled, 2, self.index).reshape(x.shape[0], -1))


def _norms_and_gather():
    return NormsAndGather(), (8, 3, 6, 6)


@pytest.mark.parametrize("build", [_mlp, _cnn, _transformer, _norms_and_gather],
                         ids=["mlp", "cnn", "transformer", "lrn-instance-norm-gather"])
def test_training_step_gradients_match_torch_autograd(build):
    torch.manual_seed(0)
    module, shape = build()
    x = torch.randn(*shape)
    labels = torch.tensor([0, 1, 2, 3, 4, 0, 1, 2])
    module.eval()
    graph = nnbridge.from_torch(module, [x], for_training=True)
    module.train()
    module.zero_grad()
    torch.nn.functional.cross_entropy(module(x), labels).backward()
    want = {name: p.grad.numpy() for name, p in module.named_parameters()}

    step = TrainingStep(graph, tuple(shape[1:]), labels.numpy(), shape[0], "cross-entropy")
    _, _, grads, _ = step.run(x.numpy(), labels.numpy(), np.random.default_rng(0))
    got = dict(zip(step.params, grads))
    assert set(want) <= set(got), f"parameters without a gradient: {sorted(set(want) - set(got))}"
    for name, expected in want.items():
        error = np.abs(got[name].reshape(expected.shape) - expected).max() / np.abs(expected).max()
        assert error <= 1e-5, f"{name}: relative error {error:.2e}"


def test_the_backward_reads_the_forward_max_pools_indices_instead_of_pooling_again():
    """MaxPool's gradient scatters to the positions its Indices name: the forward node gains that
    output and the backward reads it (pooling twice per step cost the CNN bench a fifth of its step)."""
    from nnbridge.training.graph import training_graph

    torch.manual_seed(0)
    module, shape = _cnn()
    graph = nnbridge.from_torch(module.eval(), [torch.randn(*shape)], for_training=True)
    built = training_graph(graph, tuple(shape[1:]), (), shape[0], "cross-entropy")
    pools = [n for n in built.graph.nodes if n.op == "MaxPool"]
    assert len(pools) == 1 and len(pools[0].outputs) == 2
    assert {n.op for n, _ in pools[0].outputs[1].uses()} >= {"Reshape"}


def test_a_trained_torch_export_saves_with_its_aliased_tensors_apart(tmp_path):
    """torch's exporter aliases a BatchNorm's running variance to its weight (both ones at export);
    after training they differ, and the saved model keeps both — onnxruntime agrees with nnbridge."""
    from nnbridge.check import run_onnxruntime

    torch.manual_seed(0)
    module, shape = _cnn()
    x = torch.randn(64, *shape[1:]).numpy()
    labels = np.arange(64) % 5
    result = nnbridge.train(nnbridge.from_torch(module.eval(), [torch.randn(*shape)], for_training=True), x, labels,
                            epochs=1, batch_size=8, val_split=0)
    path = result.save(tmp_path / "trained.onnx")
    import onnx

    model = onnx.load(path)
    feeds = {model.graph.input[0].name: x[:8]}
    ours = nnbridge.run(nnbridge.load(model), feeds)
    np.testing.assert_allclose(next(iter(run_onnxruntime(model, feeds).values())), next(iter(ours.values())),
                               rtol=1e-4, atol=1e-5)
    names = {i.name for i in model.graph.initializer}
    assert {"1.running_var", "1.running_mean", "1.weight", "1.bias"} <= names


@pytest.mark.parametrize("shape", [(16, 6), (8, 6, 5), (4, 6, 3, 5)])
def test_the_fused_batch_norm_pair_against_torch(shape):
    """BatchNormTraining and its BatchNormTrainingGrad (float64) against torch's BatchNorm in
    training mode: the output, the running statistics (torch's unbiased variance) and the gradients
    of the input, weight and bias, each within 1e-10 relative."""
    from nnbridge.kernels import get_kernel

    rng = np.random.default_rng(0)
    x, dy = rng.normal(1.5, 2.0, shape), rng.normal(size=shape)
    scale, bias, mean, var = rng.normal(size=6), rng.normal(size=6), rng.normal(size=6), rng.random(6) + 0.5
    layer = {2: torch.nn.BatchNorm1d, 3: torch.nn.BatchNorm1d, 4: torch.nn.BatchNorm2d}[len(shape)](
        6, eps=1e-3, momentum=0.3).double().train()
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(scale))
        layer.bias.copy_(torch.from_numpy(bias))
        layer.running_mean.copy_(torch.from_numpy(mean))
        layer.running_var.copy_(torch.from_numpy(var))
    xt = torch.from_numpy(x).requires_grad_()
    out = layer(xt)
    out.backward(torch.from_numpy(dy))
    forward, backward = (get_kernel(op, "nnbridge.training").fn for op in ("BatchNormTraining",
                                                                           "BatchNormTrainingGrad"))
    y, new_mean, new_var, inv_std = forward(None, x, scale, bias, mean, var, epsilon=1e-3, momentum=0.7, unbiased=1)
    dx, dscale, dbias = backward(None, dy, x, scale, inv_std)
    for got, want in ((y, out), (new_mean, layer.running_mean), (new_var, layer.running_var), (dx, xt.grad),
                      (dscale, layer.weight.grad), (dbias, layer.bias.grad)):
        want = want.detach().numpy()
        assert np.abs(got - want).max() <= 1e-10 * np.abs(want).max()


def _one_op_gradient(node, feeds: dict, wrt: list[str], out_shape, extra_inits=()):
    """The gradient of Σ w·op(feeds) (float64) by nnbridge's rule, for each name in ``wrt``; w is returned."""
    from onnx import TensorProto, helper, numpy_helper

    from nnbridge.passes import run_passes
    from nnbridge.passes.autodiff import gradients

    w = np.random.default_rng(7).normal(size=out_shape)
    double = TensorProto.DOUBLE
    graph = helper.make_graph(
        [node, helper.make_node("Mul", ["y", "w"], ["m"]), helper.make_node("ReduceSum", ["m"], ["loss"], keepdims=0)],
        "one_op", [helper.make_tensor_value_info(n, double, list(a.shape)) for n, a in feeds.items()],
        [helper.make_tensor_value_info("loss", double, [])], [numpy_helper.from_array(w, "w"), *extra_inits])
    loaded = nnbridge.load(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]))
    run_passes(loaded, ["infer-shapes"])
    grads = gradients(loaded, loaded.outputs[0], [loaded.get(n) for n in wrt])
    loaded.outputs[:] = list(grads.values())
    result = nnbridge.compile(loaded, backend="reference", passes=[]).run(feeds)
    return {n: result[grads[n].name] for n in wrt}, torch.from_numpy(w)


def _close(got: np.ndarray, want) -> float:
    want = want.detach().numpy()
    return float(np.abs(got - want).max() / np.abs(want).max())


@pytest.mark.parametrize("size", [3, 5])
def test_the_lrn_rule_against_torch(size):
    """ONNX's LRN window and torch's LocalResponseNorm agree for odd sizes (for even ones ONNX puts
    the extra channel after, torch before). alpha, beta and bias are exact in float32, as ONNX stores them."""
    from onnx import helper

    x = np.random.default_rng(1).normal(size=(2, 7, 3, 3)) * 2
    node = helper.make_node("LRN", ["x"], ["y"], size=size, alpha=0.25, beta=0.75, bias=2.0)
    got, w = _one_op_gradient(node, {"x": x}, ["x"], x.shape)
    xt = torch.from_numpy(x).requires_grad_()
    (torch.nn.functional.local_response_norm(xt, size, alpha=0.25, beta=0.75, k=2.0) * w).sum().backward()
    assert _close(got["x"], xt.grad) <= 1e-10


def test_the_instance_normalization_rule_against_torch():
    from onnx import helper

    rng = np.random.default_rng(2)
    feeds = {"x": rng.normal(1.0, 2.0, (3, 4, 5, 2)), "scale": rng.normal(size=4), "bias": rng.normal(size=4)}
    node = helper.make_node("InstanceNormalization", ["x", "scale", "bias"], ["y"], epsilon=1e-3)
    got, w = _one_op_gradient(node, feeds, list(feeds), feeds["x"].shape)
    xt, st, bt = (torch.from_numpy(feeds[n]).requires_grad_() for n in ("x", "scale", "bias"))
    (torch.nn.functional.instance_norm(xt, weight=st, bias=bt, eps=1e-3) * w).sum().backward()
    for name, tensor in (("x", xt), ("scale", st), ("bias", bt)):
        assert _close(got[name], tensor.grad) <= 1e-10, name


def test_the_gather_elements_rule_against_torch_gather():
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(3)
    x, index = rng.normal(size=(4, 5)), rng.integers(0, 5, size=(4, 8))
    node = helper.make_node("GatherElements", ["x", "index"], ["y"], axis=1)
    got, w = _one_op_gradient(node, {"x": x}, ["x"], index.shape, [numpy_helper.from_array(index, "index")])
    xt = torch.from_numpy(x).requires_grad_()
    (torch.gather(xt, 1, torch.from_numpy(index)) * w).sum().backward()
    assert _close(got["x"], xt.grad) <= 1e-12


@pytest.mark.parametrize(("shape", "axis"), [((6, 10), -1), ((3, 4, 8), 2), ((3, 4, 2, 5), 1)])
def test_the_layer_norm_rule_against_torch(shape, axis):
    """One LayerNormalizationGrad: dX, dscale and dB against torch's layer_norm (float64, 1e-10)."""
    from onnx import helper

    rng = np.random.default_rng(4)
    normalized = shape[axis % len(shape):]
    feeds = {"x": rng.normal(0.5, 2.0, shape), "scale": rng.normal(size=normalized),
             "bias": rng.normal(size=normalized)}
    node = helper.make_node("LayerNormalization", ["x", "scale", "bias"], ["y"], axis=axis, epsilon=1e-3)
    got, w = _one_op_gradient(node, feeds, list(feeds), shape)
    xt, st, bt = (torch.from_numpy(feeds[n]).requires_grad_() for n in ("x", "scale", "bias"))
    (torch.nn.functional.layer_norm(xt, normalized, st, bt, eps=1e-3) * w).sum().backward()
    for name, tensor in (("x", xt), ("scale", st), ("bias", bt)):
        assert _close(got[name], tensor.grad) <= 1e-10, name
