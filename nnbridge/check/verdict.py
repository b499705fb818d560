"""The verdict table and the metrics of one compared output (docs/check.md).

An element agrees when its error is within a bound counted in the number format
that limits the comparison — the coarser of the model's precision and the
backend's storage format:

    |a − r|  ≤  ulps · ulp_F(r)  +  scale · ε_F · max|r|

``ulp_F(r)`` is the spacing of format F at the reference value (so a one-ulp
difference always agrees), ``ε_F`` is F's machine epsilon and ``max|r|`` is the
output's scale (elements near zero inherit rounding errors of the larger terms
they cancel, so they are judged against the scale, never against themselves).
NaN and ±inf agree only at the same positions on both sides *and* when the model
declares that the output may carry them. One row per format; ``RULES`` is the
table that docs/check.md prints.

Where the float32 oracle itself is no closer to the exact value than that (``against_exact``),
an output that fails the row is judged again against a float64 evaluation ``x``:

    |a − x|  ≤  ulps · ulp_F(x)  +  scale · ε_F · max|x|  +  k · max|r − x|

the row measured from the exact value, widened by k times the oracle's own worst error on
that output (``ORACLE_FACTOR``): the backend DIFFERs only when it is materially worse than
onnxruntime.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import ml_dtypes
import numpy as np

from ..ir import DType

#: float formats ordered from finest to coarsest (the comparison uses the coarsest involved)
_BY_PRECISION = (DType.FLOAT64, DType.FLOAT32, DType.FLOAT16, DType.BFLOAT16)
_FORMAT_NAMES = {DType.FLOAT32: "fp32", DType.FLOAT16: "fp16", DType.BFLOAT16: "bf16"}


@dataclass(kw_only=True, frozen=True)
class Rule:
    """One row of the verdict table: the elementwise bound of a number format."""

    name: str
    format: DType
    ulps: float = 0.0        # multiples of ulp_F(|ref|)
    scale: float = 0.0       # multiples of eps_F · max|ref|, for a model's outputs
    node_scale: float = 0.0  # the same for one node re-run alone (``check --layerwise``)
    rtol: float = 0.0        # user override: multiples of |ref|
    atol: float = 0.0        # user override: absolute
    metric: str = "max"      # the statistic of |a − ref| / bound that must be ≤ 1 (``METRICS``)

    @property
    def eps(self) -> float:
        return float(ml_dtypes.finfo(self.format.numpy).eps)

    def for_node(self) -> Rule:
        """The bound for one node's own error: it rounds once instead of compounding through depth."""
        if not self.node_scale:
            return self
        return replace(self, name=f"{self.name} (one node)", scale=self.node_scale, node_scale=0.0)

    def bound(self, ref: np.ndarray, scale: float) -> np.ndarray:
        """The largest |actual − ref| that agrees, per element."""
        bound = self.scale * self.eps * scale + self.atol + self.rtol * np.abs(ref)
        if self.ulps:
            bound = bound + self.ulps * ulp(ref, self.format)
        return bound

    def describe(self) -> str:
        terms = []
        if self.ulps:
            terms.append(f"{self.ulps:g} ulp({_FORMAT_NAMES[self.format]})")
        if self.scale:
            terms.append(f"{self.scale:g}·eps·max|ref|")
        if self.rtol:
            terms.append(f"{self.rtol:g}·|ref|")
        if self.atol:
            terms.append(f"{self.atol:g}")
        text = f"{self.name}: |a−ref| ≤ " + " + ".join(terms or ["0"])
        return text if self.metric == "max" else f"{text}, {self.metric} of |a−ref|/bound ≤ 1"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "format": _FORMAT_NAMES[self.format], "text": self.describe()}


#: the verdict table (docs/check.md gives the measurements behind each figure). A model's
#: outputs carry roundings compounded over its depth; a node re-run alone from the backend's
#: inputs rounds once, so its bound is tighter, and a 5 % fault in one node stays above it
#: (bf16: 2 ulps + 2 eps·max|ref| is at most 4 eps = 3.1 % at the largest elements).
RULES: dict[str, Rule] = {
    "fp32": Rule(name="fp32", format=DType.FLOAT32, ulps=64, scale=512, node_scale=256),
    "fp16": Rule(name="fp16", format=DType.FLOAT16, ulps=2, scale=8, node_scale=4),
    "bf16": Rule(name="bf16", format=DType.BFLOAT16, ulps=2, scale=4, node_scale=2),
}


def format_name(dtype: DType) -> str:
    """The table's name for a float format ("fp32" for fp64 and anything without a row)."""
    return _FORMAT_NAMES.get(coarsest(dtype), "fp32")


def coarsest(*dtypes: DType | None) -> DType:
    """The least precise of the float formats given (fp64 counts as fp32: no finer row)."""
    found = [d for d in dtypes if d in _BY_PRECISION]
    worst = max(found, key=_BY_PRECISION.index, default=DType.FLOAT32)
    return DType.FLOAT32 if worst is DType.FLOAT64 else worst


def rule_for(model_precision: DType | None, backend_precision: DType | None,
             rtol: float | None = None, atol: float | None = None) -> Rule:
    """The table row for a model on a backend; ``rtol``/``atol`` replace it by a custom bound."""
    fmt = coarsest(model_precision, backend_precision)
    if rtol is not None or atol is not None:
        return Rule(name="custom", format=fmt, rtol=rtol or 0.0, atol=atol or 0.0)
    return RULES[format_name(fmt)]


#: ``--metric``: which statistic of the per-element error, in units of its bound, must be ≤ 1
#: (polygraphy's ``--check-error-stat``); "max" is every element within its bound
METRICS = ("max", "mean", "median", "quantile:Q")


def parse_metric(text: str) -> str:
    """``max``, ``mean``, ``median`` or ``quantile:Q`` with 0 ≤ Q ≤ 1, normalised; refused in one line otherwise."""
    from ..base.errors import UsageError

    name, sep, q = text.strip().partition(":")
    if not sep and name in ("max", "mean", "median"):
        return name
    if name == "quantile" and sep:
        try:
            value = float(q)
        except ValueError:
            value = math.nan
        if 0 <= value <= 1:
            return f"quantile:{value:g}"
    raise UsageError(f"--metric {text}: write one of {', '.join(METRICS)} (Q between 0 and 1, e.g. quantile:0.99)")


def with_tolerances(rule: Rule, tolerances: Mapping[str, tuple[float, float]] | None, metric: str = "max"
                    ) -> Callable[[str], Rule]:
    """Output name → its rule: ``rule`` (with ``metric``), or ``|a−ref| ≤ atol + rtol·|ref|`` for the
    outputs ``tolerances`` names (``--tol NAME=RTOL,ATOL``)."""
    base = replace(rule, metric=metric)
    custom = {name: Rule(name=f"custom ({name})", format=rule.format, rtol=rtol, atol=atol, metric=metric)
              for name, (rtol, atol) in (tolerances or {}).items()}
    return lambda name: custom.get(name, base)


def checked_tolerances(tolerances: Mapping[str, tuple[float, float]] | None,
                       outputs: Sequence[str]) -> Mapping[str, tuple[float, float]] | None:
    """``tolerances`` when every name is an output; refused in one line listing the outputs otherwise."""
    from ..base.errors import InputError

    unknown = sorted(set(tolerances or {}) - set(outputs))
    if unknown:
        raise InputError(f"--tol names unknown output(s) {unknown}; the model's outputs are {list(outputs)}")
    return tolerances


def ulp(x: np.ndarray, fmt: DType) -> np.ndarray:
    """The spacing of format ``fmt`` at |x| (subnormal spacing below the smallest normal)."""
    info = ml_dtypes.finfo(fmt.numpy)
    mag = np.abs(np.asarray(x, np.float64))
    _, exp = np.frexp(mag)  # mag = m·2^exp with m in [0.5, 1)
    exp = np.where(mag == 0, info.minexp, np.maximum(exp - 1, info.minexp))
    return np.ldexp(1.0, exp - info.nmant)


@dataclass(kw_only=True)
class OutputCheck:
    """One output compared with the oracle under one rule."""

    name: str
    shape: list[int]
    dtype: str
    rule: str
    ok: bool
    size: int = 0
    max_abs_err: float = 0.0
    scale: float = 0.0            # max |ref| over finite elements
    err_vs_scale: float = 0.0     # max_abs_err / scale
    outside: int = 0              # elements that break the bound (non-finite ones included)
    outside_frac: float = 0.0
    ulp_err: float | None = None  # max_abs_err in ulps of the rule's format at the scale (fp16/bf16)
    sqnr_db: float | None = None  # 10·log10(Σref² / Σ(a−ref)²) (fp16/bf16)
    nonfinite_expected: int = 0
    nonfinite_actual: int = 0
    nonfinite_matched: int = 0    # NaN/±inf at the same positions with the same value
    metric: str = "max"           # the statistic judged (``Rule.metric``)
    metric_value: float | None = None  # that statistic of |a − ref| / bound (not "max": ``outside`` says it)
    exact: str = ""               # the float64 evaluator, when the output was judged against it
    exact_err: float | None = None         # max |a − float64|
    oracle_exact_err: float | None = None  # max |oracle − float64|: the oracle's own error
    exact_outside: int | None = None       # elements outside the oracle-relative bound
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: jsonable(v) for k, v in asdict(self).items()}


def jsonable(value: Any) -> Any:
    """Floats for JSON: non-finite ones as the strings "inf", "-inf", "nan"."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def compare(name: str, actual: Any, expected: Any, rule: Rule, nonfinite_ok: bool = False,
            same_dtype: bool = True) -> OutputCheck:
    """Compare one output; ``nonfinite_ok`` when the model declares it may hold NaN/inf.

    ``same_dtype=False`` compares values only (intermediates: the IR's opset may type an
    output differently from the model's own, e.g. Dropout-7's float mask is bool today)."""
    if isinstance(expected, (list, tuple)) or isinstance(actual, (list, tuple)):
        return _compare_sequence(name, actual, expected, rule, nonfinite_ok, same_dtype)
    a, e = np.asarray(actual), np.asarray(expected)
    shape = list(e.shape)
    base = OutputCheck(name=name, shape=shape, dtype=str(e.dtype), rule=rule.name, ok=False, size=int(e.size))
    if a.shape != e.shape:
        base.note = f"shape {list(a.shape)} != expected {shape}"
        base.max_abs_err = base.err_vs_scale = math.inf
        base.outside, base.outside_frac = base.size, 1.0
        return base
    if e.dtype.kind in "OUSbc" or a.dtype.kind in "OUSbc" or (e.dtype.kind in "iu" and a.dtype.kind in "iu"):
        if not same_dtype and e.dtype.kind in "iufb" and a.dtype.kind in "iufb":
            a = a.astype(e.dtype)
        return _compare_exact(base, a, e, same_dtype)
    wide = np.float64 if np.float64 in (a.dtype, e.dtype) else np.float32  # fp32 differences are exact enough
    terms = _ErrorTerms(a.astype(wide, copy=False), e.astype(wide, copy=False))
    _fill_errors(base, terms, rule, nonfinite_ok)
    notes = [f"dtype {a.dtype} != expected {e.dtype}"] if a.dtype != e.dtype else []
    if base.nonfinite_matched and not nonfinite_ok:
        notes.append(f"NaN/inf at the same {base.nonfinite_matched} position(s) on both sides, and the model "
                     "does not declare non-finite outputs")
    base.note = "; ".join(notes + terms.mismatch_notes())
    within = base.outside == 0 if base.metric_value is None else base.metric_value <= 1
    base.ok = within and (a.dtype == e.dtype or not same_dtype)
    return base


class _ErrorTerms:
    """Element-wise error of ``actual`` against ``expected``: the reference values and differences
    where both are finite, and the NaN/inf positions that agree or do not."""

    def __init__(self, actual: np.ndarray, expected: np.ndarray):
        self.fa, self.fe = np.isfinite(actual), np.isfinite(expected)
        both = self.fa & self.fe
        if both.all():
            with np.errstate(over="ignore"):  # fp32 values near the top of the range
                self.ref, self.diff = expected, np.abs(actual - expected)
            self.same_special = self.mismatched = np.zeros(0, bool)
            return
        with np.errstate(invalid="ignore", over="ignore"):
            self.same_special = ~self.fa & ~self.fe & ((np.isnan(actual) & np.isnan(expected)) | (actual == expected))
            self.diff = np.where(both, np.abs(actual - expected), 0)
        self.mismatched = ~both & ~self.same_special
        self.ref = np.where(both, expected, 0)

    def mismatch_notes(self) -> list[str]:
        if not self.mismatched.size:
            return []
        counts = ((int(np.count_nonzero(~self.fa & self.fe)), "NaN/inf where the oracle is finite"),
                  (int(np.count_nonzero(self.fa & ~self.fe)), "finite where the oracle has NaN/inf"),
                  (int(np.count_nonzero(~self.fa & ~self.fe & ~self.same_special)),
                   "NaN/inf of another kind than the oracle's"))
        return [f"{n} {what}" for n, what in counts if n]


def _fill_errors(base: OutputCheck, terms: _ErrorTerms, rule: Rule, nonfinite_ok: bool) -> None:
    """The check's figures from the error terms: scale, counts outside the rule, the statistic,
    err/scale and, for narrow formats, ULPs and SQNR."""
    ref, diff, mismatched, same_special = terms.ref, terms.diff, terms.mismatched, terms.same_special
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    base.scale = scale
    base.nonfinite_expected = int(terms.fe.size - np.count_nonzero(terms.fe))
    base.nonfinite_actual = int(terms.fa.size - np.count_nonzero(terms.fa))
    base.nonfinite_matched = int(np.count_nonzero(same_special))
    base.outside = _count_outside(diff, ref, scale, rule) + int(np.count_nonzero(mismatched))
    if base.nonfinite_matched and not nonfinite_ok:
        base.outside += base.nonfinite_matched
    base.outside_frac = base.outside / base.size if base.size else 0.0
    base.max_abs_err = math.inf if mismatched.any() else float(np.max(diff, initial=0.0))
    if rule.metric != "max":
        base.metric = rule.metric
        base.metric_value = _statistic(diff, ref, scale, rule, mismatched if mismatched.size else None,
                                       same_special if (same_special.size and not nonfinite_ok) else None)
    base.err_vs_scale = base.max_abs_err / scale if scale else (0.0 if base.max_abs_err == 0 else math.inf)
    if rule.format is not DType.FLOAT32:
        base.ulp_err = base.max_abs_err / float(ulp(np.float64(scale), rule.format))
        base.sqnr_db = _sqnr_db(ref, diff, scale)


def _statistic(diff: np.ndarray, ref: np.ndarray, scale: float, rule: Rule, mismatched: np.ndarray | None,
               undeclared: np.ndarray | None) -> float:
    """``rule.metric`` of the per-element error in units of its bound (0/0 = 0, x/0 = inf); a NaN/inf
    that does not agree counts as an infinite error."""
    bound = rule.bound(ref, scale)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(diff == 0, 0.0, diff / np.where(bound > 0, bound, 0.0))
    bad = None if mismatched is None else mismatched if undeclared is None else mismatched | undeclared
    if bad is not None:
        ratio = np.where(bad, np.inf, ratio)
    ratio = np.ravel(ratio)
    if not ratio.size:
        return 0.0
    name, _, q = rule.metric.partition(":")
    if name == "mean":
        return float(np.mean(ratio))
    # "inverted_cdf": an element's own ratio, never an interpolation that would make inf from inf·0
    return float(np.quantile(ratio, 0.5 if name == "median" else float(q), method="inverted_cdf"))


#: k of the oracle-relative rule: a backend may be as far from the exact value as twice the
#: oracle's own worst error on the output (two implementations of equal quality fall on either
#: side of it; twice the oracle's worst is materially worse)
ORACLE_FACTOR = 2.0


def retryable(check: OutputCheck, rule: Rule) -> bool:
    """A float output that fails a table row on finite elements: the float64 evaluation may clear it
    (never a custom ``--rtol``/``--atol`` bound, an exact comparison, a shape or NaN/inf mismatch)."""
    return (not check.ok and not (rule.rtol or rule.atol) and rule.metric == "max" and check.rule == rule.name
            and check.outside > 0
            and math.isfinite(check.max_abs_err)
            and check.nonfinite_actual == check.nonfinite_expected == check.nonfinite_matched)


def against_exact(check: OutputCheck, actual: Any, expected: Any, exact: Any, rule: Rule, evaluator: str,
                  nonfinite_ok: bool = False) -> OutputCheck:
    """``check`` judged again with the oracle-relative rule (module docstring) against ``exact``,
    the float64 evaluation; only outputs ``retryable`` accepts (tensors of one dtype) are changed."""
    if (not retryable(check, rule) or (check.nonfinite_matched and not nonfinite_ok)
            or not isinstance(actual, np.ndarray) or not isinstance(expected, np.ndarray)
            or actual.dtype != expected.dtype):
        return check
    a, r, x = (np.asarray(v, np.float64) for v in (actual, expected, exact))
    if x.shape != r.shape:
        return replace(check, note=joined(check.note, f"the float64 evaluation ({evaluator}) has shape "
                                                       f"{list(x.shape)}"))
    finite = np.isfinite(a) & np.isfinite(r) & np.isfinite(x)
    if not finite.all():
        same = (np.isnan(a) & np.isnan(x)) | (a == x)
        if not same[~finite].all():
            return replace(check, note=joined(check.note, f"the float64 evaluation ({evaluator}) has NaN/inf "
                                                           "at other positions"))
        a, r, x = a[finite], r[finite], x[finite]
    err, oracle_err = np.abs(a - x), np.abs(r - x)
    worst_oracle = float(np.max(oracle_err, initial=0.0))
    scale = float(np.max(np.abs(x), initial=0.0))
    outside = int(np.count_nonzero(err > rule.bound(x, scale) + ORACLE_FACTOR * worst_oracle))
    worst = float(np.max(err, initial=0.0))
    text = (f"against a float64 evaluation ({evaluator}): max error {worst:.3g} (onnxruntime's own: "
            f"{worst_oracle:.3g}), {outside} element(s) outside the row + {ORACLE_FACTOR:g}× onnxruntime's error")
    return replace(check, ok=outside == 0, exact=evaluator, exact_err=worst, oracle_exact_err=worst_oracle,
                   exact_outside=outside, note=joined(check.note, text))


def joined(*notes: str) -> str:
    """Notes in one line."""
    return "; ".join(n for n in notes if n)


def _compare_sequence(name: str, actual: Any, expected: Any, rule: Rule, nonfinite_ok: bool,
                      same_dtype: bool) -> OutputCheck:
    """A sequence output: same length, every tensor under the rule; the worst figures are reported."""
    if not isinstance(actual, (list, tuple)) or not isinstance(expected, (list, tuple)) or len(actual) != len(expected):
        size = len(expected) if isinstance(expected, (list, tuple)) else 1
        return OutputCheck(name=name, shape=[size], dtype="sequence", rule=rule.name, ok=False, size=size,
                           max_abs_err=math.inf, scale=0.0, err_vs_scale=math.inf, outside=size, outside_frac=1.0,
                           note=f"sequence of {_length(actual)} != expected sequence of {_length(expected)}")
    parts = [compare(f"{name}[{i}]", a, e, rule, nonfinite_ok, same_dtype)
             for i, (a, e) in enumerate(zip(actual, expected))]
    merged = OutputCheck(name=name, shape=[len(parts)], dtype="sequence", rule=parts[0].rule if parts else rule.name,
                         ok=all(p.ok for p in parts), size=sum(p.size for p in parts))
    for key in ("max_abs_err", "scale", "err_vs_scale"):
        setattr(merged, key, max((getattr(p, key) for p in parts), default=0.0))
    for key in ("outside", "nonfinite_expected", "nonfinite_actual", "nonfinite_matched"):
        setattr(merged, key, sum(getattr(p, key) for p in parts))
    merged.outside_frac = merged.outside / merged.size if merged.size else 0.0
    merged.note = "; ".join(f"{p.name}: {p.note}" for p in parts if p.note)
    return merged


def _length(value: Any) -> str:
    return str(len(value)) if isinstance(value, (list, tuple)) else "a tensor"


def _count_outside(diff: np.ndarray, ref: np.ndarray, scale: float, rule: Rule) -> int:
    """Elements whose error breaks the rule; the ulp term is evaluated only where the rest does not suffice."""
    cheap = rule.scale * rule.eps * scale + rule.atol
    over = diff > (cheap + rule.rtol * np.abs(ref) if rule.rtol else cheap)
    if not rule.ulps or not over.any():
        return int(np.count_nonzero(over))
    d, r = diff[over].astype(np.float64), ref[over]
    return int(np.count_nonzero(d > rule.bound(r, scale)))


def _sqnr_db(ref: np.ndarray, diff: np.ndarray, scale: float) -> float:
    """Signal-to-quantisation-noise ratio in dB (sums of squares taken relative to the scale)."""
    if not scale:
        return math.inf if not diff.any() else -math.inf
    noise = float(np.sum(np.square(diff / scale), dtype=np.float64))
    signal = float(np.sum(np.square(ref / scale), dtype=np.float64))
    return math.inf if noise == 0 else 10 * math.log10(signal / noise)


def _compare_exact(base: OutputCheck, a: np.ndarray, e: np.ndarray, same_dtype: bool = True) -> OutputCheck:
    """Integers, booleans, strings (and complex numbers): every element must be equal."""
    base.rule = "exact"
    if e.dtype.kind in "OUS" or a.dtype.kind in "OUS":
        differ = a.astype(str) != e.astype(str)
    else:
        differ = a != e
        if a.size and e.dtype.kind in "iub" and a.dtype.kind in "iub":
            wide_a, wide_e = a.astype(np.float64), e.astype(np.float64)
            base.max_abs_err = float(np.max(np.abs(wide_a - wide_e)))
            base.scale = float(np.max(np.abs(wide_e)))
            base.err_vs_scale = base.max_abs_err / base.scale if base.scale else float(base.max_abs_err > 0)
    base.outside = int(np.count_nonzero(differ))
    base.outside_frac = base.outside / base.size if base.size else 0.0
    same_type = a.dtype == e.dtype or (a.dtype.kind in "OUS" and e.dtype.kind in "OUS") or not same_dtype
    if not same_type:
        base.note = f"dtype {a.dtype} != expected {e.dtype}"
    base.ok = base.outside == 0 and same_type
    return base
