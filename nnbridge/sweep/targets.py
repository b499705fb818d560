"""What a sweep can vary and record on each simulator, and how one point is evaluated.

A target lists its settings (the simulator's own config fields, with their types), the metrics
it can report (each a function of the simulator's totals), and evaluates a point: the model's
graph after the backend's pass pipeline is cached per worker process (a sweep loads every model
once per worker, not once per point), then each point compiles it with the point's settings and
reads the timing model's totals (``perf_only``: no numerics).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from ..base.errors import InputError, NNBridgeError
from ..ir import Graph


@dataclass(frozen=True)
class SettingField:
    name: str
    kind: type
    choices: tuple[str, ...] = ()

    def check(self, value: Any, where: str) -> Any:
        """The value in this field's type, or one line naming the field."""
        if self.kind is bool:
            if isinstance(value, bool):
                return value
        elif self.kind is int:
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            if isinstance(value, float) and value.is_integer():
                return int(value)
        elif self.kind is float:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
        elif isinstance(value, str) and (not self.choices or value in self.choices):
            return value
        expected = f"one of {', '.join(self.choices)}" if self.choices else self.kind.__name__
        raise InputError(f"{where}: value {value!r} is not {expected}")


@dataclass(kw_only=True, frozen=True)
class Target:
    name: str
    fields: dict[str, SettingField]
    metrics: dict[str, Callable[[dict[str, Any]], float]]
    undefined: dict[str, str]  # metric → why this simulator does not define it
    default_metrics: tuple[str, ...]
    validate: Callable[[dict[str, Any]], None]  # raises InputError for settings outside the valid range
    evaluate: Callable[[Graph, dict[str, Any]], dict[str, Any]]  # settings → the simulator's totals
    pipeline_backend: str

    def check_metric(self, metric: str, where: str) -> None:
        if metric in self.undefined:
            raise InputError(f"{where}: metric '{metric}' is not defined for {self.name}: {self.undefined[metric]}")
        if metric not in self.metrics:
            raise InputError(f"{where}: unknown metric '{metric}' (known for {self.name}: {', '.join(self.metrics)})")

    def check_value(self, name: str, value: Any, where: str) -> None:
        kind = self.fields[name].kind
        if kind in (int, float) and value <= 0:
            raise InputError(f"{where}: value {value!r} is outside the valid range (must be > 0)")
        try:
            self.validate({name: value})
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None


# -- SMV ---------------------------------------------------------------------------------------------------

def _smv_fields() -> dict[str, SettingField]:
    from ..backends.smv.config import MemPolicy, SmvConfig

    out = {}
    for f in dataclasses.fields(SmvConfig):
        if f.name == "perf_only":
            continue
        default = getattr(SmvConfig(), f.name)
        if isinstance(default, Enum):
            out[f.name] = SettingField(f.name, str, tuple(m.value for m in MemPolicy))
        else:
            out[f.name] = SettingField(f.name, type(default))
    return out


def _smv_config(settings: dict[str, Any]):
    from ..backends.smv import make_config

    return make_config(None, perf_only=True, set=settings)


def _smv_validate(settings: dict[str, Any]) -> None:
    _smv_config(settings)


def _smv_evaluate(graph: Graph, settings: dict[str, Any]) -> dict[str, Any]:
    from ..backends import get_backend

    exe = get_backend("smv").compile(graph.copy(), config=_smv_config(settings))
    return dict(exe.report.totals)


_SMV_METRICS: dict[str, Callable[[dict[str, Any]], float]] = {
    "latency_ms": lambda t: t["latency_ms"],
    "throughput_samples_per_s": lambda t: 1e3 / t["latency_ms"] if t["latency_ms"] else math.inf,
    "cycles": lambda t: t["accel_cycles"],
    "dram_bytes": lambda t: t["dram_mb"] * 2**20,
    "utilisation_pct": lambda t: t.get("macc_util_pct", 0.0),
    "compute_pct": lambda t: t["compute_pct"],
    "transfer_pct": lambda t: t["transfer_pct"],
    "cpu_pct": lambda t: t["cpu_pct"],
    "invocations": lambda t: t["invocations"],
}

# -- RDU ---------------------------------------------------------------------------------------------------

_RDU_COMPILE = {"preset": SettingField("preset", str, ("plasticine", "sn10", "sn40l")),
                "mode": SettingField("mode", str, ("o0", "o1")),
                "batch_size": SettingField("batch_size", int), "micro_batch": SettingField("micro_batch", int)}


def _rdu_fields() -> dict[str, SettingField]:
    from ..backends.rdu.config import Machine
    from ..backends.rdu.presets import DEFAULT_PRESET, PRESETS

    base = PRESETS[DEFAULT_PRESET]
    out = dict(_RDU_COMPILE)
    for f in dataclasses.fields(Machine):
        if f.name in ("name", "tiers", "provenance", "storage"):
            continue
        value = getattr(base, f.name)
        out[f.name] = SettingField(f.name, float if isinstance(value, float) else int)
    return out


def _rdu_split(settings: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    compile_options = {k: v for k, v in settings.items() if k in _RDU_COMPILE}
    machine = {k: v for k, v in settings.items() if k not in _RDU_COMPILE}
    return compile_options, machine


def _rdu_validate(settings: dict[str, Any]) -> None:
    from ..backends.rdu import CompileOptions, machine_for
    from ..backends.rdu.presets import DEFAULT_PRESET

    options, machine = _rdu_split(settings)
    machine_for(options.get("preset", DEFAULT_PRESET), **machine)
    CompileOptions(options.get("mode", "o1"), options.get("batch_size", 1), options.get("micro_batch", 1)).validated()


def _rdu_evaluate(graph: Graph, settings: dict[str, Any]) -> dict[str, Any]:
    from ..backends import get_backend

    options, machine = _rdu_split(settings)
    exe = get_backend("rdu").compile(graph.copy(), **options, **machine)
    return dict(exe.measure_performance().totals)


_RDU_METRICS: dict[str, Callable[[dict[str, Any]], float]] = {
    "latency_ms": lambda t: t["latency_us"] / 1e3,
    "throughput_samples_per_s": lambda t: t["throughput_samples_per_s"],
    "steady_throughput_samples_per_s": lambda t: t["steady_throughput_samples_per_s"],
    "utilisation_pct": lambda t: 100 * t["flops_utilization"],
    "memory_bytes": lambda t: t["memory_bytes"],
    "compute_units_used": lambda t: t["compute_units_used"],
    "sections": lambda t: t["sections"],
}

_NO_ENERGY = "its spec gives no per-operation energies (SMAUG reports only normalized energy)"

TARGETS: dict[str, Target] = {
    "smv": Target(name="smv", fields=_smv_fields(), metrics=_SMV_METRICS,
                  undefined={"energy": _NO_ENERGY, "memory_bytes": "SMV's scratchpads are fixed; use dram_bytes"},
                  default_metrics=("latency_ms", "cycles", "dram_bytes", "utilisation_pct"),
                  validate=_smv_validate, evaluate=_smv_evaluate, pipeline_backend="smv"),
    "rdu": Target(name="rdu", fields=_rdu_fields(), metrics=_RDU_METRICS,
                  undefined={"energy": "the RDU model has no power figures",
                             "cycles": "the RDU model reports time, not cycles",
                             "dram_bytes": "the RDU model reports on-chip memory (memory_bytes), not DRAM traffic"},
                  default_metrics=("latency_ms", "throughput_samples_per_s", "utilisation_pct", "memory_bytes"),
                  validate=_rdu_validate, evaluate=_rdu_evaluate, pipeline_backend="rdu"),
}


# -- models ------------------------------------------------------------------------------------------------

def _large_builders() -> dict[str, Callable[[], Any]]:
    from ..zoo import bert_base, llama_decoder

    return {"bert_base": bert_base, "llama_decoder": llama_decoder}


def resolve_model_ref(ref: str, base_dir: Path | None, where: str) -> str:
    """A model reference as the workers will load it: a zoo or large-builder name, or an absolute path."""
    from .. import zoo

    if ref in zoo.names() or ref in _large_builders():
        return ref
    path = Path(ref) if base_dir is None or Path(ref).is_absolute() else base_dir / ref
    if not path.is_file():
        raise InputError(f"{where}: model '{ref}' is neither a zoo model ({', '.join(zoo.names())}, bert_base, "
                         f"llama_decoder) nor a file")
    return str(path.resolve())


@functools.lru_cache(maxsize=16)
def prepared_graph(ref: str, backend: str) -> Graph:
    """The model after the backend's pass pipeline, once per worker process."""
    import nnbridge
    from nnbridge.passes import run_passes

    from .. import zoo
    from ..backends import get_backend

    builders = _large_builders()
    model = zoo.build(ref) if ref in zoo.names() else builders[ref]() if ref in builders else ref
    graph = nnbridge.load(model)
    run_passes(graph, get_backend(backend).pipeline(1))
    return graph


def evaluate_point(backend: str, point: dict[str, Any], metrics: list[str]) -> dict[str, Any]:
    """One row: the point's fields, then each metric, or an ``error`` naming why it failed."""
    target = TARGETS[backend]
    settings = {k: v for k, v in point.items() if k != "model"}
    row: dict[str, Any] = dict(point)
    try:
        totals = target.evaluate(prepared_graph(point["model"], target.pipeline_backend), settings)
        row.update({m: float(target.metrics[m](totals)) for m in metrics})
        row["error"] = ""
    except NNBridgeError as exc:
        row.update({m: math.nan for m in metrics})
        row["error"] = str(exc).splitlines()[0]
    except Exception as exc:  # a failing point never stops the sweep; its row says why
        row.update({m: math.nan for m in metrics})
        row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
    return row
