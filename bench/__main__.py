"""``python -m bench`` runs every ``bench/bench_*.py`` in turn (or those named on the command line)."""

import argparse
import importlib
import pkgutil
import sys
from pathlib import Path

BENCHES = sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.name.startswith("bench_"))

parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                 epilog="example: python -m bench bench_architectures bench_physics")
parser.add_argument("names", nargs="*", metavar="NAME", help=f"benches to run (default: all): {', '.join(BENCHES)}")
names = parser.parse_args().names or BENCHES
unknown = [name for name in names if name not in BENCHES]
if unknown:  # refused before any bench starts: a misspelt name must not cost the others' minutes
    parser.error(f"no bench {', '.join(unknown)} (they are {', '.join(BENCHES)})")
failed = 0
for name in names:
    print(f"\n=== {name} ===", flush=True)
    module = importlib.import_module(f"bench.{name}")
    failed += bool(module.main())
sys.exit(1 if failed else 0)
