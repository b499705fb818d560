"""What ``port`` finds, one row per target: converts?, numerics, cost, size and what to do next.

Every cell is filled: a target that is refused says why in its numerics and cost cells too.
``to_dict`` is the JSON of ``port --json``; ``cells`` the text of the table the command prints
and the HTML page shows (``html.py``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(kw_only=True)
class Conversion:
    """Does the target take the model: ``yes``, ``with rewrites`` or ``no``."""

    status: str
    #: op → nodes the target's decompositions (ir/decompositions.py) rewrote
    rewrites: dict[str, int] = field(default_factory=dict)
    #: a refusal: convert's (or compile's) headline and its lines, one per reason, root cause first
    headline: str = ""
    reasons: list[str] = field(default_factory=list)
    #: what would help: a flag, or another target that takes the model
    hints: list[str] = field(default_factory=list)
    #: file name → bytes, of the files the target's command writes
    files: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status != "no"

    @property
    def bytes(self) -> int:
        return sum(self.files.values())

    def cell(self) -> str:
        if self.status == "yes":
            return "yes"
        if self.status == "with rewrites":
            return "with rewrites: " + ", ".join(f"{op} ×{n}" for op, n in self.rewrites.items())
        lines = [f"no: {self.headline}", *(f"• {r}" for r in self.reasons), *(f"→ {h}" for h in self.hints)]
        return "\n".join(lines)


@dataclass(kw_only=True)
class Numerics:
    """The converted file on its target's simulator or reference backend against onnxruntime on
    the source model: ``agree``, ``DIFFER`` or ``not run`` (and why)."""

    verdict: str
    backend: str = ""
    rule: str = ""
    #: the worst output's error, or why nothing ran
    detail: str = ""
    #: the first node that overflows (NaN/inf) or diverges, with where that was found
    first_node: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict == "agree"

    def cell(self) -> str:
        head = f"{self.verdict} on {self.backend}" if self.backend else self.verdict
        return "\n".join(p for p in (head, self.detail, self.rule, self.first_node) if p)


@dataclass(kw_only=True)
class SmvCost:
    """SMAUG's latency breakdown (``simulate --perf-only``) of the file, or of the source model
    when no file is written."""

    priced: str
    latency_ms: float
    compute_pct: float
    transfer_pct: float
    cpu_pct: float
    cpu_layers: int

    def text(self) -> str:
        cpu = f"; {self.cpu_layers} layer(s) on the CPU" if self.cpu_layers else ""
        return (f"SMV {self.latency_ms:,.3f} ms ({self.priced})\ncompute {self.compute_pct:.0f} %, transfer "
                f"{self.transfer_pct:.0f} %, CPU {self.cpu_pct:.0f} %{cpu}")


@dataclass(kw_only=True)
class RduThroughput:
    batch: int
    micro_batch: int
    samples_per_s: float
    #: what bounds the batch's time most (``backends/rdu/reporting.by_cause``) and its share
    bound: str
    bound_share: float
    #: the program estimated: compiled for this batch, or the batch-1 program
    program: str

    def text(self) -> str:
        return (f"{self.samples_per_s:,.1f} samples/s at batch {self.batch} (micro-batch {self.micro_batch}, "
                f"{self.program}; {self.bound} {100 * self.bound_share:.0f} %)")


@dataclass(kw_only=True)
class RduCost:
    """RDU throughput at batch 1 and at the smallest batch (powers of two) whose time goes mostly to
    compute-bound stages, and the program's sections and memory tiers."""

    batch1: RduThroughput
    busy: RduThroughput
    #: False when no batch up to the search's limit is compute-bound (``busy`` is the last tried)
    compute_bound: bool
    sections: int
    machine: str
    on_chip_bytes: float
    weights_by_tier: dict[str, float]

    def text(self) -> str:
        tiers = ", ".join(f"{t} {b / 2**20:,.2f} MiB" for t, b in self.weights_by_tier.items() if b) or "none"
        if self.busy.batch == 1:
            busy = "compute-bound at batch 1 already"
        elif self.compute_bound:
            busy = f"compute-bound: {self.busy.text()}"
        else:
            busy = f"not compute-bound up to batch {self.busy.batch}: {self.busy.text()}"
        return (f"RDU {self.machine}: {self.batch1.text()}\n{busy}\n{self.sections} section(s), "
                f"{self.on_chip_bytes / 2**20:,.2f} MiB on chip; weights off chip: {tiers}")


@dataclass(kw_only=True)
class TargetReport:
    target: str
    title: str
    conversion: Conversion
    numerics: Numerics
    #: the cost model's verdict, or why there is none
    smv: SmvCost | None = None
    rdu: RduCost | None = None
    no_cost: str = ""
    #: the commands that write the target's files (each run and checked by port) and look further
    commands: list[str] = field(default_factory=list)
    #: the target's own report page beside an HTML page (``port --html``)
    page: str = ""
    #: what the HTML page needs to draw that report (not in the JSON)
    sources: dict[str, Any] = field(default_factory=dict, repr=False)

    def cost_cell(self) -> str:
        parts = [c.text() for c in (self.smv, self.rdu) if c is not None]
        return "\n".join(parts) or self.no_cost

    def size_cell(self) -> str:
        files = self.conversion.files
        if not files:
            return "— (nothing written)"
        return f"{self.conversion.bytes / 2**20:,.2f} MiB in {len(files)} file(s)"

    def cells(self) -> list[str]:
        """target, converts?, numerics, cost, size, next."""
        return [self.title, self.conversion.cell(), self.numerics.cell(), self.cost_cell(), self.size_cell(),
                "\n".join(self.commands)]

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k != "sources"}
        data["conversion"]["ok"] = self.conversion.ok
        data["conversion"]["bytes"] = self.conversion.bytes
        data["numerics"]["ok"] = self.numerics.ok
        data["cost"] = self.cost_cell()
        return data


#: the table's columns
COLUMNS = ["target", "converts?", "numerics (vs onnxruntime on the source)", "cost", "size", "next"]


@dataclass(kw_only=True)
class PortReport:
    model: str
    #: the pins applied to every target (symbol → value, input → shape)
    dims: dict[str, int] = field(default_factory=dict)
    input_shapes: dict[str, list[int]] = field(default_factory=dict)
    #: how the inputs every target ran on were made
    inputs: list[dict[str, Any]] = field(default_factory=list)
    targets: list[TargetReport] = field(default_factory=list)
    seconds: float = 0.0

    def target(self, name: str) -> TargetReport:
        return next(t for t in self.targets if t.target == name)

    def rows(self) -> list[list[str]]:
        return [t.cells() for t in self.targets]

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "dims": self.dims, "input_shapes": self.input_shapes, "inputs": self.inputs,
                "targets": [t.to_dict() for t in self.targets], "seconds": self.seconds}
