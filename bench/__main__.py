"""``python -m bench`` runs every ``bench/bench_*.py`` in turn (or those named on the command line)."""

import importlib
import pkgutil
import sys
from pathlib import Path

names = sys.argv[1:] or sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)])
                               if m.name.startswith("bench_"))
failed = 0
for name in names:
    print(f"\n=== {name} ===", flush=True)
    module = importlib.import_module(f"bench.{name}")
    failed += bool(module.main())
sys.exit(1 if failed else 0)
