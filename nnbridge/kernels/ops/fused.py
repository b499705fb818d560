"""``nnbridge.Fused``: run a fused group's body graph as one unit."""

from __future__ import annotations

from ..registry import kernel


@kernel("Fused", domain="nnbridge")
def fused(ctx, *inputs, body):
    results = ctx.run_graph(body, {v.name: x for v, x in zip(body.inputs, inputs)})
    return results[0] if len(results) == 1 else tuple(results)
