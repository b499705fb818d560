"""PyTorch entry (optional extra): a traced module runs on our backends like any ONNX model."""

from __future__ import annotations

import numpy as np
import pytest

import nnbridge

torch = pytest.importorskip("torch")


def _module():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                               torch.nn.Linear(8 * 6 * 6, 5))


def test_from_torch_matches_torch():
    module = _module()
    x = torch.randn(2, 3, 6, 6)
    graph = nnbridge.from_torch(module, [x])
    (name,) = [v.name for v in graph.inputs]
    ours = list(nnbridge.run(graph, {name: x.numpy()}).values())[0]
    np.testing.assert_allclose(ours, module(x).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_sambaflow_compiles_a_torch_module():
    from nnbridge import sambaflow

    module = _module()
    x = torch.randn(1, 3, 6, 6)
    program = sambaflow.compile(module, [x])
    out = list(sambaflow.run(program, [x]).values())[0]
    np.testing.assert_allclose(out, module(x).detach().numpy(), rtol=5e-2, atol=5e-2)


def test_sambaflow_trains_a_torch_module_with_its_torch_optimizer(tmp_path):
    """SambaFlow's loop: compile with the optimizer, then run fwd+bwd+opt per step; fwd alone
    leaves the weights as they are."""
    from nnbridge import sambaflow

    module = _module()
    x, y = torch.randn(8, 3, 6, 6), torch.tensor([0, 1, 2, 3, 4, 0, 1, 2])
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1, momentum=0.9)
    program = sambaflow.compile(module, [x], optimizer, batch_size=8, pef=tmp_path / "step.pef")
    assert [s.kind for s in program.sections][0] == "fwd" and program.sections[-1].kind == "opt"
    first = float(sambaflow.run(program, [x, y], section_types=["fwd"])["loss"])
    assert float(sambaflow.run(program, [x, y], section_types=["fwd"])["loss"]) == first
    losses = [float(sambaflow.run(program, [x, y], section_types=["fwd", "bwd", "opt"])["loss"]) for _ in range(6)]
    assert losses[0] == pytest.approx(first) and losses[-1] < 0.5 * first
    with pytest.raises(nnbridge.InputError, match="runs"):
        sambaflow.run(program, [x, y], section_types=["bwd"])
