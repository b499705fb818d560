"""The house plan of docs/architecture.md, enforced on the source: what may import what, no circle
between modules, and one registry type that refuses a second definition for a key."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from nnbridge.errors import DuplicateRegistrationError
from nnbridge.registry import Registry

PACKAGE = Path(__file__).resolve().parents[1] / "nnbridge"
#: leaf modules every layer may use: the exception hierarchy and the registry type
FOUNDATION = {"nnbridge.errors", "nnbridge.registry"}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _runtime_imports(tree: ast.AST):
    """Import statements, leaving out ``if TYPE_CHECKING:`` blocks (annotations only)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in _runtime_imports(child))
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _runtime_imports(node)


def _imports(module: str, path: Path) -> set[str]:
    targets = set()
    for node in _runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            prefix = node.module or ""
            if node.level:
                base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                prefix = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else []))
            names = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in MODULES else prefix for a in node.names]
        for name in names:
            while name not in MODULES and "." in name:
                name = name.rsplit(".", 1)[0]
            if name in MODULES and name != module:
                targets.add(name)
    return targets


EDGES = {module: _imports(module, path) for module, path in MODULES.items()}


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ("ir", "kernels", "passes"):
        return parts[1]
    if len(parts) > 2 and parts[1] in ("backends", "converters") and parts[2] != "base":
        return f"{parts[1]}.{parts[2]}"
    if len(parts) > 1 and parts[1] in ("backends", "converters"):
        return parts[1]  # the interface the backends (converters) share
    return module


def _violations(source_layer, allowed) -> list[str]:
    bad = []
    for module, targets in sorted(EDGES.items()):
        if source_layer(_layer(module)):
            bad += [f"{module} -> {t}" for t in sorted(targets)
                    if t not in FOUNDATION and not allowed(_layer(module), _layer(t))]
    return bad


def test_ir_imports_no_other_nnbridge_package():
    assert _violations(lambda s: s == "ir", lambda s, t: t == "ir" or t.startswith("nnbridge.protos")) == []


def test_kernels_import_only_the_ir():
    assert _violations(lambda s: s == "kernels", lambda s, t: t in ("ir", "kernels")) == []


def test_passes_import_only_the_ir_and_the_kernels():
    assert _violations(lambda s: s == "passes", lambda s, t: t in ("ir", "kernels", "passes")) == []


def test_no_backend_imports_another_backend_or_a_converter():
    def allowed(s: str, t: str) -> bool:
        return not t.startswith("converters") and t in (s, "backends") or not t.startswith(("backends", "converters"))

    assert _violations(lambda s: s.startswith("backends."), allowed) == []


def test_no_converter_imports_a_backend():
    assert _violations(lambda s: s.startswith("converters"), lambda s, t: not t.startswith("backends")) == []


def test_no_circle_between_modules():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in EDGES[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(EDGES):
        if module not in index:
            visit(module)
    assert circles == []


def test_the_checker_sees_what_it_should():
    """The rules above hold because the graph is right, not because it is empty."""
    assert "nnbridge.kernels" in EDGES["nnbridge.backends.reference.backend"]
    assert "nnbridge.kernels.registry" in EDGES["nnbridge.kernels.ops.conv"]
    assert "nnbridge.converters.smaug.export_ops" in EDGES["nnbridge.converters.smaug.writer"]
    assert len(MODULES) > 150


def test_a_registry_refuses_a_second_definition_naming_both():
    table: Registry[str, object] = Registry("toys")

    def first():
        return 1

    def second():
        return 2

    table.register("Toy", first)
    with pytest.raises(DuplicateRegistrationError) as caught:
        table.register("Toy", second)
    message = str(caught.value)
    assert "toys" in message and "'Toy'" in message
    assert f"{__name__}.{first.__qualname__}" in message and f"{__name__}.{second.__qualname__}" in message
    assert table["Toy"] is first and list(table) == ["Toy"]
    assert table.unregister("Toy") is first and "Toy" not in table


def _registries() -> list[Registry]:
    """Every registry instance the package defines at module level (imported here, so all load)."""
    import importlib

    found = {}
    for module in MODULES:
        if ".protos" in module or module.endswith("__main__"):
            continue
        for value in vars(importlib.import_module(module)).values():
            if isinstance(value, Registry):
                found[id(value)] = value
    return list(found.values())


def test_every_table_of_definitions_is_a_registry():
    """The tables that used to be plain dicts (12 of them, none refusing a duplicate)."""
    names = {r.name for r in _registries()}
    assert {"kernels", "passes", "backends", "formats", "schemas", "zoo models", "SMV lowerers",
            "ONNX exporters", "ONNX opset adapters", "SMAUG importers", "SMAUG exporters",
            "LBANN importers", "LBANN exporters", "gradient rules", "decompositions", "op traits"} <= names, names


def test_a_registry_decorator_files_the_function_under_each_key_and_returns_it():
    table: Registry[str, tuple[str, object]] = Registry("toys")

    @table.decorator("A", "B", value=lambda key, fn: (key, fn))
    def toy():
        return 1

    assert toy() == 1 and table["A"] == ("A", toy) and table["B"] == ("B", toy)
    assert table.origin("A") == f"{__name__}.{toy.__qualname__}"
    with pytest.raises(DuplicateRegistrationError, match="toys: 'B' is defined twice"):
        table.decorator("B")(lambda: 2)


@pytest.mark.parametrize("registry", _registries(), ids=lambda r: r.name)
def test_every_registry_refuses_re_registering_an_existing_key(registry):
    key = next(iter(registry))
    with pytest.raises(DuplicateRegistrationError, match=registry.name):
        registry.register(key, registry[key])
    assert key in registry
