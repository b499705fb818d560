"""RDU tests share the validation models with ``bench/`` (bench/rdu_models.py)."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
