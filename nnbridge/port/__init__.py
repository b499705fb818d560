"""``nnbridge port MODEL``: where a model can go (SMAUG Reference and SMV, LBANN, the RDU), what must
change, whether the numbers hold and what it costs, in one table (issue #39)."""

from .core import port
from .report import Conversion, Numerics, PortReport, RduCost, RduThroughput, SmvCost, TargetReport
from .targets import TARGETS, Target, parse_targets

__all__ = ["port", "PortReport", "TargetReport", "Conversion", "Numerics", "SmvCost", "RduCost", "RduThroughput",
           "TARGETS", "Target", "parse_targets"]
