"""Write nnbridge's LBANN ``.proto`` schemas from the facts of LBANN's own schemas.

The facts (``specs/lbann-schema/lbann-<version>.json``: every message, field and enum of
LBANN's ``src/proto/*.proto`` at a release) are turned into one ``.proto`` file per era:

- ``lbann.proto`` (package ``lbann_data``, Era C) from the newest Era C facts (develop), which
  contain every message and field of v0.104 as well (``--check`` verifies that);
- ``lbann_v099.proto`` (package ``lbann_v099``, Era A) from the v0.99 facts; its own package so
  both eras live in one descriptor pool. Text files do not name packages, so it reads the same.

A new LBANN release means: dump its facts, re-run this script, ``make protos``.

    python tools/lbann_schema.py [--facts DIR] [--check]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "nnbridge" / "protos" / "lbann"
FACTS = REPO.parent / "shared" / "specs" / "lbann-schema"
PACKAGE = "lbann_data"

#: output file → (facts file, package written, facts whose every field it must also hold)
ERAS = {
    "lbann.proto": ("lbann-develop.json", "lbann_data", ("lbann-v0.104.json",)),
    "lbann_v099.proto": ("lbann-v0.99.json", "lbann_v099", ()),
}

class Node:
    """One name in the schema's namespace: a message (with fields), an enum, or both's parent."""

    def __init__(self) -> None:
        self.fields: list[dict] | None = None
        self.enum: dict[str, int] | None = None
        self.children: dict[str, Node] = {}


def namespace(facts: dict) -> Node:
    root = Node()
    for kind, table in (("fields", facts["messages"]), ("enum", facts["enums"])):
        for full_name, info in table.items():
            node = root
            for part in full_name.removeprefix(PACKAGE + ".").split("."):
                node = node.children.setdefault(part, Node())
            if kind == "fields":
                node.fields = info["fields"]
            else:
                node.enum = info
    return root


def relative(type_name: str) -> str:
    """A type reference as written in the .proto: ``.lbann_data.X.Y`` → ``X.Y`` resolved from the
    package (a leading dot keeps it absolute, so nested scopes never shadow it)."""
    if type_name.startswith("google."):
        return "." + type_name
    return "." + "{package}" + type_name.removeprefix(PACKAGE)


def map_entry(node: Node, field: dict) -> tuple[str, str] | None:
    """(key type, value type) when the field is a protobuf map (a repeated ``…Entry`` message)."""
    target = field.get("message", "")
    if not (field["repeated"] and target.endswith("Entry")):
        return None
    entry = node.children.get(target.rsplit(".", 1)[1])
    if entry is None or entry.fields is None or [f["name"] for f in entry.fields] != ["key", "value"]:
        return None
    key, value = entry.fields
    return key["type"], _type(value)


def _type(field: dict) -> str:
    if field["type"] == "message":
        return relative(field["message"])
    if field["type"] == "enum":
        return relative(field["enum"])
    return field["type"]


def render(name: str, node: Node, indent: str) -> list[str]:
    if node.enum is not None:
        values = sorted(node.enum.items(), key=lambda item: item[1])
        return [f"{indent}enum {name} {{", *(f"{indent}  {v} = {n};" for v, n in values), f"{indent}}}"]
    maps = {f["message"].rsplit(".", 1)[1] for f in node.fields or () if map_entry(node, f)}
    lines = [f"{indent}message {name} {{"]
    for child_name, child in node.children.items():
        if child_name not in maps:
            lines += render(child_name, child, indent + "  ")
    items: list[str | list[str]] = []  # a field line, or the lines of one oneof (at its first field)
    groups: dict[str, list[str]] = {}
    for field in node.fields or ():
        if (kv := map_entry(node, field)) is not None:
            line = f"map<{kv[0]}, {kv[1]}> {field['name']} = {field['number']};"
        else:
            line = f"{'repeated ' if field['repeated'] else ''}{_type(field)} {field['name']} = {field['number']};"
        if "oneof" not in field:
            items.append(line)
        elif field["oneof"] in groups:
            groups[field["oneof"]].append(line)
        else:
            groups[field["oneof"]] = [field["oneof"], line]
            items.append(groups[field["oneof"]])
    for item in items:
        if isinstance(item, str):
            lines.append(f"{indent}  {item}")
        else:
            lines += [f"{indent}  oneof {item[0]} {{", *(f"{indent}    {f}" for f in item[1:]), f"{indent}  }}"]
    return lines + [f"{indent}}}"]


def proto_text(facts: dict, package: str, source: str) -> str:
    root = namespace(facts)
    body: list[str] = []
    for name, node in root.children.items():
        body += render(name, node, "")
    text = "\n".join(body).replace("{package}", package)
    used = set(re.findall(r"\.google\.protobuf\.(\w+)", text))
    imports = sorted({"google/protobuf/any.proto" if t == "Any" else "google/protobuf/wrappers.proto" for t in used})
    header = [f"// Generated by tools/lbann_schema.py from the facts of {source}.",
              "// Do not edit: re-run the script, then make protos.",
              'syntax = "proto3";', f"package {package};", ""]
    header += [f'import "{path}";' for path in imports]
    return "\n".join(header + ([""] if imports else []) + [text, ""])


def missing(facts: dict, other: dict) -> list[str]:
    """Messages/fields/enum values of ``other`` that ``facts`` lacks or numbers differently."""
    problems = []
    for message, info in other["messages"].items():
        have = facts["messages"].get(message)
        if have is None:
            problems.append(message)
            continue
        numbers = {f["name"]: f["number"] for f in have["fields"]}
        problems += [f"{message}.{f['name']}" for f in info["fields"] if numbers.get(f["name"]) != f["number"]]
    for enum, values in other["enums"].items():
        problems += [f"{enum}.{v}" for v in values if v not in facts["enums"].get(enum, {})]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--facts", type=Path, default=FACTS, help=f"folder of the fact files (default {FACTS})")
    parser.add_argument("--check", action="store_true", help="exit 1 if a written schema is stale")
    args = parser.parse_args(argv)
    status = 0
    for out_name, (facts_name, package, covered) in ERAS.items():
        facts = json.loads((args.facts / facts_name).read_text())
        for other_name in covered:
            if gaps := missing(facts, json.loads((args.facts / other_name).read_text())):
                print(f"{facts_name} lacks {len(gaps)} names of {other_name}: {', '.join(gaps[:5])}")
                status = 1
        text = proto_text(facts, package, facts["source"])
        target = OUT / out_name
        if args.check:
            if not target.is_file() or target.read_text() != text:
                print(f"{target.relative_to(REPO)} is stale: run python tools/lbann_schema.py")
                status = 1
        else:
            target.write_text(text)
            print(f"wrote {target.relative_to(REPO)} ({len(facts['messages'])} messages, "
                  f"{len(facts['enums'])} enums)")
    return status


if __name__ == "__main__":
    sys.exit(main())
