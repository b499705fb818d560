"""Regenerate ``*_pb2.py`` for every ``.proto`` under ``nnbridge/protos/<format>/``.

``make protos`` runs this; ``python -m nnbridge.protos.generate --check`` exits 1
if any generated file is stale (used by the tests). Imports inside the generated
code are rewritten to be package-relative so the formats never clash with other
packages' protos of the same name; a folder with a ``pool.py`` registers its descriptors
in that private pool instead of protobuf's default one.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def proto_dirs() -> list[Path]:
    return sorted(p for p in HERE.iterdir() if p.is_dir() and any(p.glob("*.proto")))


def generate(folder: Path) -> dict[str, str]:
    """Generated sources of one folder: {file name: text}."""
    import grpc_tools
    from grpc_tools import protoc

    well_known = Path(grpc_tools.__file__).parent / "_proto"  # google/protobuf/*.proto
    with tempfile.TemporaryDirectory() as out:
        protos = sorted(str(p.name) for p in folder.glob("*.proto"))
        args = ["protoc", f"-I{folder}", f"-I{well_known}", f"--python_out={out}", *protos]
        if protoc.main(args) != 0:
            raise SystemExit(f"protoc failed for {folder}")
        result = {}
        modules = {Path(p).stem + "_pb2" for p in protos}
        for path in sorted(Path(out).glob("*_pb2.py")):
            text = path.read_text()
            for mod in modules:  # 'import x_pb2 as ...' → 'from . import x_pb2 as ...'
                text = re.sub(rf"^import {mod} as", f"from . import {mod} as", text, flags=re.M)
            if (folder / "pool.py").is_file():  # the folder's own descriptor pool (see its pool.py)
                text = text.replace("_descriptor_pool.Default()", "_pool.POOL")
                text = text.replace("from google.protobuf import symbol_database as _symbol_database\n",
                                    "from google.protobuf import symbol_database as _symbol_database\n"
                                    "from . import pool as _pool\n")
            result[path.name] = text
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if generated code is stale")
    args = parser.parse_args(argv)
    stale = []
    for folder in proto_dirs():
        for name, text in generate(folder).items():
            target = folder / name
            if args.check:
                if not target.is_file() or target.read_text() != text:
                    stale.append(str(target.relative_to(HERE.parent.parent)))
            else:
                target.write_text(text)
                print(f"generated {target.relative_to(HERE.parent.parent)}")
        init = folder / "__init__.py"
        if not init.exists() and not args.check:
            init.write_text(f'"""Generated protobuf code for {folder.name} (see ../generate.py)."""\n')
    if stale:
        print("stale generated protobuf code (run 'make protos'): " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
