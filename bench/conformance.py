"""ONNX node-test conformance report (``nnbridge/apps/conformance.py``) for the three runtimes.

    python -m bench.conformance                  # all cases, all three runtimes → docs/conformance.md
    python -m bench.conformance --only nnbridge --op Conv --verbose
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nnbridge.apps.conformance import RUNTIMES, run_all, summary_table, write_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=list(RUNTIMES), action="append", help="runtimes to run (default all)")
    parser.add_argument("--op", help="only cases testing this op")
    parser.add_argument("--name", help="only cases whose name contains this text")
    parser.add_argument("--verbose", "-v", action="store_true", help="list every non-passing case")
    parser.add_argument("--out", type=Path, default=Path("docs/conformance.md"),
                        help="report written after a full, unfiltered run (default: %(default)s)")
    args = parser.parse_args(argv)
    results = run_all(args.only or list(RUNTIMES), args.op, args.name)
    print(summary_table(results))
    if not (args.only or args.op or args.name):
        write_report(results, args.out)
        print(f"wrote {args.out}")
    if args.verbose:
        for r, outs in results.items():
            for o in outs:
                if o.status != "passed":
                    print(f"{r:15s} {o.status:12s} {o.op:20s} {o.case}: {o.detail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
