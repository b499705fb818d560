"""Design-space sweeps over the SMV and RDU simulators, run as Ray tasks (``nnbridge[sweep]``).

``spec`` reads and validates a TOML spec, ``targets`` says what each simulator can vary and
record, ``engine`` runs the points (Ray or serial) into CSV + Parquet, ``report`` draws plots and
an HTML page. The sweep sits above the backends: no backend imports Ray.
"""

from .engine import SweepSummary, read_results, run_sweep
from .spec import Spec, load_spec, parse_spec, point_key

__all__ = ["Spec", "SweepSummary", "load_spec", "parse_spec", "point_key", "read_results", "run_sweep"]
