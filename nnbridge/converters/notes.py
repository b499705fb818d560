"""What a conversion changed that the numbers alone do not say (``convert`` and ``port`` print it)."""

from __future__ import annotations

from typing import Any

from ..ir import Graph
from .lbann.experiment import describe as describe_experiment
from .lbann.experiment import optimizer_state_note


def conversion_notes(graph: Graph, fmt: str, options: dict[str, Any]) -> list[str]:
    """What changed on the way to a file of format ``fmt`` that the numbers alone do not say."""
    notes = []
    if fmt == "smaug":
        backend = options.get("smaug_backend") or graph.metadata.get("smaug.backend") or "SMV"
        if backend == "SMV" and any(v.type.dtype is not None and v.type.dtype.short == "float32"
                                    for v in graph.values.values()):
            notes.append("SMV stores float16: float32 weights, inputs and activations were converted "
                         "(--smaug-backend Reference keeps float32)")
        if "smaug_inputs" not in options and not graph.input_values:
            notes.append("the network input stored in the params file is SMAUG's random-data recipe "
                         "(--smaug-input NAME=FILE.npy stores yours)")
    if fmt == "lbann":
        batch = sorted({str(v.type.shape[0]) for v in graph.inputs if v.type.shape})
        notes.append(f"LBANN files hold per-sample shapes: the source's batch ({', '.join(batch)}) became "
                     f"mini_batch_size")
        if kept := describe_experiment(graph):
            notes.append(kept)
        if "lbann_train" in options and (state := optimizer_state_note(options["lbann_train"])):
            notes.append(state)
    return notes
