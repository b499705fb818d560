"""Cross-checking: a backend (or a compiled program) against an oracle, with trustworthy verdicts.

* ``verdict`` — the verdict table (one rule per number format) and per-output metrics;
* ``oracle`` — onnxruntime sessions, intermediates exposed, single nodes cut out;
* ``core`` — ``check(model, backend)``;
* ``against`` — ``check(model, against=other)``: two files, each on its own backend;
* ``saved`` — outputs saved by one run and judged in another (``--save-outputs/--load-outputs``);
* ``layerwise`` — every node compared, the first divergent node, the culprit, NaN/inf origin;
* ``program`` — a compiled RDU ``.pef`` against the reference backend (SambaFlow's ``test``);
* ``pass_debug`` — the oracle after every pass (``check --debug-passes``).

The oracles (onnxruntime, the reference backend) are used here and in tests, never in backends.
"""

from .core import check
from .oracle import oracle_model, ort_session, run_onnxruntime
from .result import CheckResult, model_precision
from .verdict import RULES, OutputCheck, Rule, compare, rule_for

__all__ = ["CheckResult", "OutputCheck", "RULES", "Rule", "check", "compare", "model_precision", "oracle_model",
           "ort_session", "rule_for", "run_onnxruntime"]
