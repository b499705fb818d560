"""Run SMAUG's own experiment scripts, unmodified, against nnbridge.smaug and compare what they
write with the files SMAUG wrote (the git blob ids of upstream.json). Upstream code is run from a
local checkout, never copied into this repository.

    python tests/smaug/builders/check_upstream.py EXPERIMENTS_CHECKOUT

EXPERIMENTS_CHECKOUT: yaoyuannnn/experiments at the commit of upstream.json. A build with a variant
first switches the script's graph name, backend and dtype (the substitutions of upstream.json).
Exits 1 if any file differs.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

MANIFEST = json.loads((Path(__file__).parent / "upstream.json").read_text())


def blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def main(checkout: Path) -> int:
    from nnbridge.smaug.scripts import run_source

    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    if head.strip() != MANIFEST["commit"]:
        print(f"warning: {checkout} is at {head.strip() or '?'}, upstream.json describes {MANIFEST['commit']}")
    failures = 0
    for build in MANIFEST["builds"]:
        script = checkout / build["upstream"]
        source = script.read_text()
        if blob(source.encode()) != build["upstream_blob"]:
            print(f"warning: {build['upstream']} is not the blob upstream.json names")
        for old, new in MANIFEST["variants"].get(build["variant"] or "", []):
            source = source.replace(old, new)
        with tempfile.TemporaryDirectory() as work:
            here = os.getcwd()
            os.chdir(work)
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    run_source(source, str(script))
            finally:
                os.chdir(here)
            for name, expected in build["writes"].items():
                got = blob((Path(work) / name).read_bytes())
                verdict = "no SMAUG file" if expected is None else "identical" if got == expected else "DIFFERS"
                failures += verdict == "DIFFERS"
                label = build["upstream"] + (f" ({build['variant']} variant)" if build["variant"] else "")
                print(f"{label:62} {name:28} {verdict}")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1])))
