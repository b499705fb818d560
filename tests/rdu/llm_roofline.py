"""The judges of the RDU model's LLM estimates: a capacity-aware roofline computed from the model's
configuration and the machine's published numbers alone (not from nnbridge's simulator), and the
figures SambaNova and the Kernel Looping paper published.

Roofline of one decode step on one of ``sockets`` tensor-parallel sockets: every weight byte of
the socket's share and every cached key/value byte is read once, from the tier that holds it
(weights fill HBM first, then DDR; tiers read concurrently), every FLOP at peak, and each socket
sends its share of the all-reduces over its link:

    t ≥ max( Σ_tier max over tiers of bytes_in_tier / bw_tier,  FLOP / peak,  link bytes / link bw )
"""

from __future__ import annotations

from dataclasses import dataclass

from nnbridge.backends.rdu.config import Machine
from nnbridge.zoo.llm import LlamaConfig

#: SambaNova, "Why SambaNova's SN40L Chip is The Best for Inference" (blog, 2024-09-10), from
#: artificialanalysis.ai: output tokens/s per user, 16-bit weights, SambaNova Cloud (16 SN40L sockets)
PUBLISHED_16_SOCKETS = {"llama-3.1-8b": 1042.0, "llama-3.1-70b": 457.0, "llama-3.1-405b": 129.0}
PUBLISHED_SOURCE = "sambanova.ai/blog/sn40l-chip-best-inference-solution (2024-09-10, Artificial Analysis)"
#: Koeplinger et al., "Kernel Looping" (arXiv 2410.23668): SN40L decode reaches over 90 % of peak
#: (memory-bound) performance on 8 and 16 sockets
KERNEL_LOOPING_FRACTION = 0.90
#: the same paper's Table 1: Llama 3.1 8B BF16, batch 1, context 4096 — GiB of parameters and of
#: KV cache read per token
KERNEL_LOOPING_8B = {"parameters_gib": 14.9, "kv_cache_gib": 0.5}
#: SN40L paper (arXiv 2405.07518): fusion speeds models up 2–13× over unfused execution
FUSION_RANGE = (2.0, 13.0)


@dataclass(frozen=True)
class Roofline:
    seconds: float
    bound: str  # what sets it: "memory" (with the tiers used), "compute" or "links"
    hbm_bytes: float
    ddr_bytes: float

    @property
    def tokens_per_s(self) -> float:
        return 1.0 / self.seconds


def socket_share(config: LlamaConfig, sockets: int) -> tuple[int, int, int, int]:
    """(query heads, key/value heads, FFN width, vocabulary) one socket holds."""
    kv = max(1, config.kv_heads // sockets)
    return config.heads // sockets, kv, config.ffn // sockets, -(-config.vocab // sockets)


def decode_roofline(config: LlamaConfig, machine: Machine, *, sockets: int = 1, context: int = 4096,
                    batch: int = 1) -> Roofline:
    heads, kv, ffn, vocab = socket_share(config, sockets)
    h, d, layers = config.hidden, config.head_dim, config.layers
    per_layer = h * d * (2 * heads + 2 * kv) + 3 * h * ffn + 2 * h
    params = layers * per_layer + h * (vocab + 1)
    weight_bytes = 2.0 * params  # bf16
    kv_bytes = 2.0 * layers * 2 * kv * d * context * batch
    flops = batch * (2.0 * params + layers * 4.0 * heads * d * context)
    tiers = {t.name: t for t in machine.tiers}
    hbm = tiers["hbm"]
    on_hbm = min(weight_bytes + kv_bytes, hbm.capacity_bytes)
    on_ddr = weight_bytes + kv_bytes - on_hbm
    memory = max(on_hbm / (hbm.bw_gbps * 1e9), on_ddr / (tiers["ddr"].bw_gbps * 1e9))
    compute = flops / machine.peak_flops
    link = (0.0 if sockets == 1 else
            layers * 2 * 2 * (sockets - 1) / sockets * batch * h * 2 / (machine.link_gbps * 1e9))
    seconds = max(memory, compute, link)
    bound = "compute" if seconds == compute else "links" if seconds == link else \
        ("memory (HBM + DDR)" if on_ddr else "memory (HBM)")
    return Roofline(seconds, bound, on_hbm, on_ddr)
