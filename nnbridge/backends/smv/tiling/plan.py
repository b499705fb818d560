"""What a tiling optimizer produces: the chosen tiles and the invocation list.

An ``Invocation`` is one accelerator kernel call: the bytes it moves (after
SMAUG's read_inputs/read_weights/send_results reuse rules) and the pipelined
work it does; the cost model prices each one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .common import TiledTensor, TilingDims

Shape = tuple[int, ...]


@dataclass(slots=True)
class Invocation:
    group: int  # dispatch unit for round-robin over accelerators (conv: weight-ofmap tile, FC: neuron tile)
    in_bytes: int  # input bytes loaded (0 when the previous call on that accelerator left it in place)
    w_bytes: int  # weight bytes loaded
    out_bytes: int  # result bytes stored (0 unless send_results)
    work: int  # pipelined iterations / vector ops of the kernel's inner loop (on spec §2's 8 PEs × 32 MACs)
    macs: int = 0
    #: conv/FC: (outputs, reduction, repeats) — the inner loop runs ceil(outputs / PEs) ·
    #: ceil(reduction / MACs per PE) · repeats iterations, so ``work`` follows the PE array's shape
    blocks: tuple[int, int, int] | None = None
    #: pool/BN/eltwise/softmax: (elements, repeats) — ceil(elements / vector lanes) · repeats vector
    #: ops, so ``work`` follows the vector units' width
    vector: tuple[int, int] | None = None


@dataclass
class TilingPlan:
    layer: Any
    family: str  # conv | fc | pool | bn | vector | softmax
    strategies: tuple[TilingDims, ...]  # inputs, weights (when present), outputs
    tiles: dict[str, Shape]  # maximal tile per operand: "input", "weights", "output"
    tiled: dict[str, TiledTensor] = field(default_factory=dict)
    invocations: list[Invocation] = field(default_factory=list)
    #: accelerators the invocation groups are dealt to, round-robin (the reuse flags follow from it)
    accels: int = 1
    #: the operator issued once per sub-batch, this many times (the plan and invocations are one call's)
    calls: int = 1

    @property
    def num_groups(self) -> int:
        """Independent invocation groups: how many accelerators the operator can keep busy."""
        return len({inv.group for inv in self.invocations}) or 1

    @property
    def num_invocations(self) -> int:
        return len(self.invocations)

    def tile_summary(self) -> str:
        tiles = " / ".join("x".join(map(str, self.tiles[k])) for k in ("input", "weights", "output") if k in self.tiles)
        return tiles if self.calls == 1 else f"{self.calls} calls of {tiles}"

    def strategy_summary(self) -> str:
        return "/".join(s.value for s in self.strategies)


def fp16_bytes(elements: int) -> int:
    return 2 * elements
