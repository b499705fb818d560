"""nnbridge ops — the support matrix, generated from the kernel and format registries."""

from __future__ import annotations

from .. import common


def register(sub) -> None:
    p = common.add_parser(sub, "ops", "which ops each backend and each format supports", """\
  nnbridge ops
  nnbridge ops --filter Conv
  nnbridge ops --markdown > docs/ops.md
""")
    p.add_argument("--filter", help="show only ops whose name contains this text")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    common.add_json_arg(p, "the support matrix ({op: {backend or format: supported}})")
    p.set_defaults(func=run)


def support_matrix() -> tuple[list[str], dict[str, dict[str, bool]]]:
    from ...backends import available_backends, get_backend
    from ...converters import formats

    columns: dict[str, set[str] | None] = {}
    for name in available_backends():
        columns[name] = get_backend(name).supported_ops()
    for name, fmt in sorted(formats().items()):
        columns[f"{name} file"] = fmt.supported_ops() if fmt.supported_ops else None
    all_ops = sorted(set().union(*(c for c in columns.values() if c)))
    matrix = {op: {col: (ops is None or op in ops) for col, ops in columns.items()} for op in all_ops}
    return list(columns), matrix


def run(args) -> int:
    from rich.table import Table

    from .. import console

    cols, matrix = support_matrix()
    ops = [op for op in matrix if not args.filter or args.filter.lower() in op.lower()]
    if args.json:
        common.write_json({"columns": cols, "ops": {op: matrix[op] for op in ops}}, args.json)
        if args.json == "-":
            return 0
    if args.markdown:
        print("| op | " + " | ".join(cols) + " |")
        print("|---|" + "---|" * len(cols))
        for op in ops:
            print(f"| {op} | " + " | ".join("✓" if matrix[op][c] else "" for c in cols) + " |")
        return 0
    table = Table(title=f"{len(ops)} ops: backends that run them, file formats that express them")
    table.add_column("op", no_wrap=True)
    for c in cols:
        table.add_column(c, justify="center")
    for op in ops:
        table.add_row(op, *[common.styled(("✓", "green")) if matrix[op][c] else "·" for c in cols])
    table.caption = ("smv marks the ops its accelerator runs; the others run on the simulated host CPU "
                     "(rdu runs every reference op)")
    console.print(table)
    return 0
