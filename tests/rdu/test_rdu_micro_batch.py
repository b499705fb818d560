"""The compiler picks the micro-batch (issue 35): a token's samples share each weight read, so
weights too big for the chip are streamed once per token instead of once per sample and a larger
batch runs faster with no flag; ``micro_batch`` stays an override, used as given. A model whose
weights overflow the last off-chip tier is refused unless overcommit is allowed; a training
step's optimizer is priced from the optimizer op's own formulas."""

from __future__ import annotations

import numpy as np
import pytest

import nnbridge
import nnbridge.zoo
from nnbridge.backends.rdu.pipeline_model import fits_on_chip, micro_batches
from nnbridge.base.errors import CapacityError
from nnbridge.ir import TRAINING_DOMAIN
from nnbridge.training import training_program
from nnbridge.zoo import OnnxBuilder
from nnbridge.zoo.llm import llama_config, llama_graph


def matmul(rows: int, cols: int):
    """One MatMul of a sample's ``rows`` values by ``rows × cols`` fp32 weights."""
    b = OnnxBuilder("matmul", seed=0)
    x = b.input("x", [1, rows])
    b.output(b.op("MatMul", [x, b.const("w", np.zeros((rows, cols), np.float32))], "mm"))
    return b.model()


@pytest.fixture(scope="module")
def streamed():
    """32 MiB of weights on the Plasticine preset (16 MB of SRAM): streamed from DRAM."""
    return matmul(2048, 4096)


def test_a_larger_batch_streams_each_weight_once_per_token_by_default(streamed):
    rates = []
    for batch in (1, 64, 4096):
        totals = nnbridge.compile(streamed, "rdu", preset="plasticine", batch_size=batch).estimate.totals
        rates.append(totals["throughput_samples_per_s"])
        assert totals["flops_utilization"] <= 1 + 1e-9 and totals["memory_utilization"] <= 1 + 1e-9
    assert rates[0] < rates[1] < rates[2]  # was 1,524.8 samples/s at all three
    assert rates[2] > 0.9 * 12.288e12 / (2 * 2048 * 4096)  # the peak's rate: weights no longer bound it


def test_an_explicit_micro_batch_is_used_as_given(streamed):
    exe = nnbridge.compile(streamed, "rdu", preset="plasticine", batch_size=64, micro_batch=1)
    assert exe.estimate.micro_batch == 1 and exe.measure_performance(batch_size=256).micro_batch == 1
    assert exe.measure_performance(batch_size=256, micro_batch=8).micro_batch == 8
    one = exe.estimate.totals["throughput_samples_per_s"]
    assert nnbridge.compile(streamed, "rdu", preset="plasticine", batch_size=64).estimate.totals[
        "throughput_samples_per_s"] > 10 * one


def test_the_chosen_micro_batch_fits_its_activations_on_chip():
    """A sample's 256 KiB of input staged per token: on 16 MB of SRAM at most 64 samples a token."""
    model = matmul(65536, 128)
    exe = nnbridge.compile(model, "rdu", preset="plasticine", batch_size=4096)
    micro = exe.estimate.micro_batch
    assert 1 < micro <= 64 and fits_on_chip(exe.sections, exe.machine, micro, exe.samples)
    assert not fits_on_chip(exe.sections, exe.machine, 128, exe.samples)
    assert exe.estimate.totals["memory_utilization"] <= 1 + 1e-9


def test_the_micro_batches_tried_for_a_batch_include_those_for_a_quarter_of_it():
    for batch in (1, 3, 12, 64, 100):
        assert set(micro_batches(batch)) <= set(micro_batches(4 * batch))
        assert max(micro_batches(batch)) == batch


@pytest.mark.slow
def test_8b_decode_at_batch_4096_reaches_half_the_peak_by_default():
    """Issue 35's case: 3.3 % of the peak with a micro-batch of 1 (each sample re-read every weight)."""
    exe = nnbridge.compile(llama_graph(llama_config("8b"), context=16), "rdu", preset="sn40l", batch_size=4096)
    assert exe.estimate.micro_batch > 1
    assert exe.estimate.totals["flops_utilization"] >= 0.5


def test_weights_beyond_the_last_tier_are_refused_unless_overcommit_is_allowed(streamed, cli, tmp_path):
    with pytest.raises(CapacityError, match=r"32\.0 MiB of weights .*dram, would hold 32\.0 MiB in its 1\.0 MiB"):
        nnbridge.compile(streamed, "rdu", preset="plasticine", dram_capacity_bytes=2**20)
    totals = nnbridge.compile(streamed, "rdu", preset="plasticine", dram_capacity_bytes=2**20,
                              allow_overcommit=True).estimate.totals
    assert totals["weights_by_tier"]["dram"] == 32 * 2**20
    path = tmp_path / "mm.onnx"
    path.write_bytes(streamed.SerializeToString())
    code, text = cli("measure-performance", path, "--preset", "plasticine", "--set", "dram_capacity_bytes=1048576")
    assert code != 0 and text.startswith("error: model 'matmul'") and "--allow-overcommit" in text
    assert len(text.strip().splitlines()) == 1
    code, text = cli("measure-performance", path, "--preset", "plasticine", "--set", "dram_capacity_bytes=1048576",
                     "--allow-overcommit")
    assert code == 0 and "dram 32.00 MiB" in text


@pytest.mark.parametrize("optimizer, decay, per_weight", [("sgd", 0.0, 4), ("sgd", 0.01, 6), ("adam", 0.0, 13),
                                                          ("adamw", 0.01, 14)])
def test_the_optimizer_step_is_priced_from_its_own_formulas(optimizer, decay, per_weight):
    """SGD with momentum (β = 1): v = αv + g, x − r·v (weight decay: g + λx); Adam: both moments,
    √h + ε, the division and the step (AdamW: the decoupled decay too). Counted as one FLOP per
    output element before: 2 and 3 per weight."""
    program = training_program(nnbridge.zoo.build("digits_cnn", batch=16), batch_size=16, optimizer=optimizer,
                               weight_decay=decay)
    exe = nnbridge.compile(program, "rdu", batch_size=16, micro_batch=1)
    step = next(n for n in exe.graph.nodes if n.domain == TRAINING_DOMAIN)
    weights = sum(v.type.numel for v in step.outputs[:len(step.inputs[2:]) // (3 if optimizer == "sgd" else 4)])
    kernel = next(k for s in exe.sections for k in s.kernels if step.name in k.ops)
    assert kernel.flops == per_weight * weights
