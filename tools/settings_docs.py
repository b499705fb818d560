"""Write each simulator's settings table into its doc (docs/smv.md, docs/rdu.md) between the
markers ``<!-- settings: NAME -->`` and ``<!-- end settings -->``, from the backend's own
declarations (``backends.base.settings_table``): ``python -m tools.settings_docs``.
tests/test_docs_settings.py fails when a doc's table differs from what this would write."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = {"smv": ROOT / "docs" / "smv.md", "rdu": ROOT / "docs" / "rdu.md"}


def marked(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- settings: {name} -->\n)(.*?)(<!-- end settings -->)", re.S)


def table(name: str) -> str:
    from nnbridge.backends import get_backend
    from nnbridge.backends.base import settings_table

    return settings_table(get_backend(name).settings)


def main() -> int:
    for name, path in DOCS.items():
        text = path.read_text()
        pattern = marked(name)
        if not pattern.search(text):
            print(f"{path}: no '<!-- settings: {name} -->' … '<!-- end settings -->' block", file=sys.stderr)
            return 1
        rows = table(name)
        path.write_text(pattern.sub(lambda m, rows=rows: m.group(1) + rows + m.group(3), text))
        print(f"wrote the {name} settings table into {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
