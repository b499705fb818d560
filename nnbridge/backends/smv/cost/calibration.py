"""Calibration of the SMV compute/transfer model against measured gem5-Aladdin cycles.

The measured data are the spec's §8.3 per-layer sums (third-party gem5-Aladdin
runs of SMAUG's shipped networks, AllDma, one accelerator). The networks are the
spec's/data README's architectures, as tiling-level layers. ``fit()`` solves, per
kernel family, a relative-error least-squares problem for

    cycles = dma_setup · requests + α_family · loaded + α_store · stored + γ_family · pipelined_work

with ``dma_setup`` fixed by the gem5 config (100 cycles per ≤4 KiB request).
The fitted α/γ are what ``SmvConfig`` ships (rounded); ``bench/bench_smv.py``
re-runs the fit and prints it next to the shipped constants, so the calibration
stays reproducible.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

import numpy as np

from ..config import FAMILY_RATES, SmvConfig
from ..layers import BNLayer, ConvLayer, FCLayer, Layer, PoolLayer
from ..tiling import plan_layer
from . import cost_plan
from .transfer import conversion_vectors, dma_requests, line_bytes


def _conv(name, hw, c, k, same=True):
    return ConvLayer(name=name, input=(1, hw, hw, c), kernels=k, kh=3, kw=3, stride_h=1, stride_w=1, same=same)


def _pool(name, hw, c):
    return PoolLayer(name=name, input=(1, hw, hw, c), ph=2, pw=2, stride_h=2, stride_w=2)


#: SMAUG's shipped SMV networks (data/README.md §1.2; spec §7.6)
NETWORKS: dict[str, list[Layer]] = {
    "minerva": [FCLayer("mat_mul", 1, 784, 256), FCLayer("mat_mul_1", 1, 256, 256),
                FCLayer("mat_mul_2", 1, 256, 256), FCLayer("mat_mul_3", 1, 256, 10)],
    "lenet5": [_conv("conv", 28, 1, 32, same=False), _conv("conv_1", 26, 32, 32, same=False),
               _pool("max_pool", 24, 32), FCLayer("mat_mul", 1, 4608, 128), FCLayer("mat_mul_1", 1, 128, 10)],
    "cnn10": [_conv("conv", 32, 3, 32), BNLayer("batch_norm", (1, 32, 32, 32)), _conv("conv_1", 32, 32, 32),
              _pool("max_pool", 32, 32), BNLayer("batch_norm_1", (1, 16, 16, 32)), _conv("conv_2", 16, 32, 64),
              _conv("conv_3", 16, 64, 64), _pool("max_pool_1", 16, 64), BNLayer("batch_norm_2", (1, 8, 8, 64)),
              FCLayer("mat_mul", 1, 4096, 512), FCLayer("mat_mul_1", 1, 512, 10)],
    "vgg": [_conv("conv", 32, 3, 64), _conv("conv_1", 32, 64, 128), _pool("max_pool", 32, 128),
            _conv("conv_2", 16, 128, 128), _conv("conv_3", 16, 128, 128), _pool("max_pool_1", 16, 128),
            _conv("conv_4", 8, 128, 256), _conv("conv_5", 8, 256, 256), _conv("conv_6", 8, 256, 256),
            _pool("max_pool_2", 8, 256), _conv("conv_7", 4, 256, 512), _conv("conv_8", 4, 512, 512),
            _conv("conv_9", 4, 512, 512), _pool("max_pool_3", 4, 512), FCLayer("mat_mul", 1, 2048, 512),
            FCLayer("mat_mul_1", 1, 512, 10)],
}

#: spec §8.3: (invocations, cycles) per layer, AllDma, 1 accelerator
MEASURED: dict[str, dict[str, tuple[int, int]]] = {
    "minerva": {"mat_mul": (16, 316_568), "mat_mul_1": (4, 103_750), "mat_mul_2": (4, 104_315),
                "mat_mul_3": (1, 4_507)},
    "lenet5": {"conv": (2, 147_173), "conv_1": (2, 160_587), "max_pool": (2, 32_256), "mat_mul": (48, 930_309),
               "mat_mul_1": (1, 2_392)},
    "cnn10": {"conv": (2, 212_044), "batch_norm": (2, 89_680), "conv_1": (3, 258_732), "max_pool": (2, 55_384),
              "batch_norm_1": (1, 26_247), "conv_2": (2, 148_507), "conv_3": (3, 274_503),
              "max_pool_1": (1, 27_386), "batch_norm_2": (1, 14_015), "mat_mul": (128, 3_292_219),
              "mat_mul_1": (1, 8_725)},
    "vgg": {"conv": (4, 412_940), "conv_1": (30, 2_150_411), "max_pool": (8, 228_386), "conv_2": (12, 1_115_383),
            "conv_3": (12, 1_115_552), "max_pool_1": (2, 53_265), "conv_4": (32, 919_872),
            "conv_5": (40, 1_812_803), "conv_6": (40, 1_814_435), "max_pool_2": (1, 27_467),
            "conv_7": (80, 2_422_757), "conv_8": (160, 4_829_861), "conv_9": (160, 4_832_415),
            "max_pool_3": (1, 14_692), "mat_mul": (64, 1_649_207), "mat_mul_1": (1, 8_806)},
}

#: spec §8.3 model totals (cycles)
MEASURED_TOTALS = {"minerva": 529_140, "lenet5": 1_272_717, "cnn10": 4_407_442, "vgg": 23_408_252}

#: spec §8.2 normalized latency (paper case studies; ResNet50 omitted: different topology)
PAPER_ACP = {"minerva": 0.50, "lenet5": 0.77, "cnn10": 0.77, "vgg": 0.75}
PAPER_ACCELS = {"minerva": {2: 0.63, 4: 0.47, 8: 0.43}, "lenet5": {2: 0.81, 4: 0.73, 8: 0.70},
                "cnn10": {2: 0.75, 4: 0.65, 8: 0.62}, "vgg": {2: 0.69, 4: 0.54, 8: 0.49}}
PAPER_BREAKDOWN = {"minerva": (18, 55, 27), "lenet5": (18, 31, 51), "cnn10": (18, 38, 44), "vgg": (34, 38, 28)}

FAMILY = {ConvLayer: "conv", FCLayer: "fc", PoolLayer: "pool", BNLayer: "bn"}


def features(layer: Layer, page: int = 4096, line: int = 32,
             lanes: int = 8) -> tuple[float, float, float, float, float]:
    """(DMA requests, loaded bytes, stored bytes, pipelined work, fp16↔fp32 conversion vectors)
    summed over the layer's invocations."""
    requests = loaded = stored = work = conversions = 0
    for inv in plan_layer(layer).invocations:
        for b, store in ((inv.in_bytes, False), (inv.w_bytes, False), (inv.out_bytes, True)):
            if b:
                requests += dma_requests(b, page)
                conversions += conversion_vectors(b, line, lanes)
                if store:
                    stored += line_bytes(b, line)
                else:
                    loaded += line_bytes(b, line)
        work += inv.work
    return requests, loaded, stored, work, conversions


_SHIPPED = SmvConfig()
_PROVENANCE = {name: provenance for name, _, provenance, _ in _SHIPPED.describe()}
#: γ fixed by the spec's pipeline description (the work rates whose provenance is the spec, §9: one
#: FC iteration / one 8-wide vector op per cycle); only conv's γ (issue-bound, §8.3 "5.6–7.9 cycles
#: per iteration" incl. transfers) is fitted
SPEC_GAMMA = {family: getattr(_SHIPPED, rates.work) for family, rates in FAMILY_RATES.items()
              if _PROVENANCE[rates.work].startswith("spec")}
#: families whose stores get their own rate (only conv's are identifiable from §8.3, see config.py)
OWN_STORE_RATE = {family for family, rates in FAMILY_RATES.items() if rates.store != rates.load}

Constants = dict[str, tuple[float, float, float]]  # family → (α load, α store, γ)


def fit(dma_setup: float = 100.0, without: str | None = None, convert: float = 0.0) -> Constants:
    """Per family (α cycles per loaded byte, α per stored byte, γ cycles per work unit),
    minimising relative error over §8.3 layers (of every network but ``without``, for a held-out
    estimate). ``convert`` cycles per fp16↔fp32 conversion vector are taken out of the measured
    cycles first: α is then the DMA's own cost (the conversion shifts α by exactly convert/16,
    so the predicted cycles do not depend on it — only the compute/transfer split does)."""
    rows: dict[str, list[tuple[float, float, float, float]]] = defaultdict(list)
    for model, layers in NETWORKS.items():
        if model == without:
            continue
        for layer in layers:
            requests, loaded, stored, work, conversions = features(layer)
            measured = MEASURED[model][layer.name][1]
            rows[FAMILY[type(layer)]].append((loaded / measured, stored / measured, work / measured,
                                              (measured - dma_setup * requests - convert * conversions) / measured))
    result = {}
    for family, data in rows.items():
        a = np.array([r[:3] for r in data])
        b = np.array([r[3] for r in data])
        if family not in OWN_STORE_RATE:  # one rate for loads and stores
            a = np.column_stack([a[:, 0] + a[:, 1], a[:, 2]])
        if family in SPEC_GAMMA:
            gamma = SPEC_GAMMA[family]
            solution = np.linalg.lstsq(a[:, :-1], b - gamma * a[:, -1], rcond=None)[0]
        else:
            *solution, gamma = np.linalg.lstsq(a, b, rcond=None)[0]
        load, store = (solution[0], solution[1]) if family in OWN_STORE_RATE else (solution[0], solution[0])
        result[family] = (float(load), float(store), float(gamma))
    return result


def predicted_cycles(layer: Layer, constants: Constants, dma_setup: float = 100.0, convert: float = 0.0) -> float:
    """The calibrated model's accelerator cycles for one layer: setup per request + α·bytes + γ·work
    + the conversion vectors."""
    requests, loaded, stored, work, conversions = features(layer)
    load, store, gamma = constants[FAMILY[type(layer)]]
    return dma_setup * requests + load * loaded + store * stored + gamma * work + convert * conversions


#: a family no fitted network has is priced like its nearest kin: batch norm (CNN10's alone, when
#: CNN10 is held out) like pooling — both stream flat fp16 vectors through the 8-wide vector units —
#: and eltwise/activation/softmax (no §8.3 layer) like batch norm, the same flat-vector kernel shape
NEAREST_FAMILY = {"bn": "pool", "vector": "bn"}


def held_out_errors(dma_setup: float = 100.0) -> dict[str, tuple[float, float]]:
    """Per network, (total error, worst layer error) with constants fitted *without* that network:
    the error to expect on a network the calibration has not seen."""
    result = {}
    for model, layers in NETWORKS.items():
        constants = _with_family_defaults(fit(dma_setup, without=model))
        errors = [predicted_cycles(layer, constants, dma_setup) / MEASURED[model][layer.name][1] - 1
                  for layer in layers]
        total = sum(predicted_cycles(layer, constants, dma_setup) for layer in layers)
        result[model] = (total / sum(MEASURED[model][layer.name][1] for layer in layers) - 1,
                         max(errors, key=abs))
    return result


def _with_family_defaults(constants: Constants) -> Constants:
    for family, kin in NEAREST_FAMILY.items():
        constants.setdefault(family, constants[kin])
    return constants


def config_with(constants: Constants, convert: float, base: SmvConfig | None = None) -> SmvConfig:
    """``base`` (the shipped config) with fitted constants in place of the shipped ones."""
    return replace((base or SmvConfig()).with_family_rates(constants), fp16_convert_cycles_per_vector=convert)


def _latency_parts(model: str, cfg: SmvConfig) -> tuple[float, float, float]:
    """(compute, transfer, CPU) ns of one network's accelerated layers."""
    parts = [0.0, 0.0, 0.0]
    for layer in NETWORKS[model]:
        cost = cost_plan(plan_layer(layer), cfg)
        for i, value in enumerate((cost.compute_ns, cost.transfer_ns, cost.cpu_ns)):
            parts[i] += value
    return parts[0], parts[1], parts[2]


def breakdown(model: str, cfg: SmvConfig) -> tuple[float, float, float]:
    """(compute, transfer, CPU) percent of one network's latency (its accelerated layers)."""
    parts = _latency_parts(model, cfg)
    return tuple(100 * p / sum(parts) for p in parts)


def fit_conversion(dma_setup: float = 100.0, without: str | None = None) -> float:
    """Cycles per fp16↔fp32 conversion vector from the paper's latency breakdown (§8.1).

    The per-layer cycles of §8.3 fix only each transfer's *total* (DMA + the accelerator's
    widening/narrowing loop); the paper's Fig. 1 tells the two apart. Moving ``c`` cycles per
    vector from transfer to compute leaves every total unchanged, so compute% and transfer% are
    linear in ``c``: least squares over both, on every network but ``without`` — bounded so that
    no DMA is left faster than the DRAM can deliver."""
    constants = _with_family_defaults(fit(dma_setup, without))
    cfg = config_with(constants, 0.0)
    dram_cycles_per_byte = cfg.clock_ghz / cfg.dram_gbps
    bytes_per_conversion = 2 * cfg.vector_width
    ceiling = bytes_per_conversion * (min(min(load, store) for load, store, _ in constants.values())
                                      - dram_cycles_per_byte)
    numerator = denominator = 0.0
    for model in NETWORKS:
        if model == without:
            continue
        parts = _latency_parts(model, cfg)
        compute, transfer = (100 * p / sum(parts) for p in parts[:2])
        slope = 100 * sum(features(layer)[4] for layer in NETWORKS[model]) / cfg.clock_ghz / sum(parts)
        paper_compute, paper_transfer, _ = PAPER_BREAKDOWN[model]
        numerator += slope * (paper_compute - compute) + slope * (transfer - paper_transfer)
        denominator += 2 * slope * slope
    return min(numerator / denominator, ceiling)


def held_out_breakdowns(dma_setup: float = 100.0) -> dict[str, tuple[float, float, float]]:
    """Per network, its (compute, transfer, CPU) percent with every constant — the conversion
    cost included — fitted without it."""
    result = {}
    for model in NETWORKS:
        convert = fit_conversion(dma_setup, without=model)
        cfg = config_with(_with_family_defaults(fit(dma_setup, without=model, convert=convert)), convert)
        result[model] = breakdown(model, cfg)
    return result
