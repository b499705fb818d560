"""The complexity gate of ``make test``: radon's cyclomatic complexity over a package.

A function rated D (21–30) is hard to read and test; E (31–40) and F (41+) are where bugs hide.
The house rule (issue #40): at most ``--max-d`` functions rated D or worse, and none rated E or
F. The script prints every D-or-worse function, worst first, and exits 1 when the rule breaks::

    python -m tools.complexity nnbridge            # the gate, as make test runs it
    python -m tools.complexity nnbridge --max-d 15
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from radon.complexity import cc_rank, cc_visit

#: generated code nobody edits by hand
SKIPPED = ("protos",)


@dataclass(frozen=True, kw_only=True)
class Rated:
    """One function or method with its complexity and radon's letter."""

    path: str
    line: int
    name: str
    complexity: int

    @property
    def rank(self) -> str:
        return cc_rank(self.complexity)


def rate(root: Path) -> list[Rated]:
    """Every function and method below ``root`` rated D or worse, worst first."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if any(part in SKIPPED for part in path.relative_to(root).parts):
            continue
        for item in cc_visit(path.read_text(encoding="utf-8")):  # functions and methods, and classes
            if not hasattr(item, "methods") and cc_rank(item.complexity) >= "D":
                found.append(Rated(path=str(path), line=item.lineno, name=item.fullname,
                                   complexity=item.complexity))
    return sorted(found, key=lambda r: (-r.complexity, r.path, r.line))


def verdict(rated: list[Rated], max_d: int) -> tuple[bool, str]:
    """Whether the rule holds, and the line that says so."""
    worst = [r for r in rated if r.rank in ("E", "F")]
    ok = len(rated) <= max_d and not worst
    return ok, (f"complexity: {len(rated)} functions rated D or worse (at most {max_d}), "
                f"{len(worst)} rated E or F (none allowed) — {'ok' if ok else 'FAILED'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="the package folder to rate")
    parser.add_argument("--max-d", type=int, default=15, help="functions rated D or worse allowed (default 15)")
    args = parser.parse_args(argv)
    rated = rate(args.root)
    for r in rated:
        print(f"  {r.rank} {r.complexity:3d}  {r.path}:{r.line} {r.name}")
    ok, line = verdict(rated, args.max_d)
    print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
