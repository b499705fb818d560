"""The house plan of docs/architecture.md, enforced on the source: what may import what, no circle
between modules, and one registry type that refuses a second definition for a key."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from nnbridge.base.errors import DuplicateRegistrationError
from nnbridge.base.registry import Registry

PACKAGE = Path(__file__).resolve().parents[1] / "nnbridge"

#: the package root holds only these; every other module lives in its layer's folder
ROOT_MODULES = {"nnbridge", "nnbridge.__main__"}


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


#: docs/architecture.md's layers, bottom up: each folder and the folders it may import. Folders not
#: listed (check, cli, sweep, the smaug/lbann/sambaflow front-ends, apps) are tools: anything.
LAYERS = {
    "base": {"base"},
    "protos": {"protos"},
    "ir": {"base", "ir", "protos"},
    "kernels": {"base", "ir", "kernels"},
    "passes": {"base", "ir", "kernels", "passes"},
    "reporting": {"base", "ir", "reporting"},
    "zoo": {"base", "ir", "zoo"},
    "backends": {"base", "ir", "kernels", "passes", "reporting", "backends"},
    "converters": {"base", "ir", "kernels", "passes", "protos", "converters"},
    "api": {"base", "ir", "kernels", "passes", "reporting", "backends", "converters", "api"},
    "training": {"base", "ir", "kernels", "passes", "reporting", "backends", "converters", "api", "training"},
}
TOOLS = {"check", "cli", "sweep", "port", "smaug", "lbann", "sambaflow", "apps"}


def _folder(module: str) -> str:
    """The layer folder a module lives in: the first name below the package."""
    return module.split(".")[1] if module.count(".") else ""


def test_every_module_lives_in_a_layer_folder():
    loose = sorted(m for m in MODULES if m not in ROOT_MODULES and _folder(m) not in LAYERS.keys() | TOOLS)
    assert loose == []


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_a_layer_imports_only_the_layers_below_it(layer):
    bad = [f"{module} -> {target}" for module, targets in sorted(EDGES.items()) if _folder(module) == layer
           for target in sorted(targets) if _folder(target) not in LAYERS[layer]]
    assert bad == []


def test_no_backend_imports_another_backend():
    """Backends share only ``nnbridge.backends``' interface modules (base, the registry)."""
    def backend(module: str) -> str | None:
        parts = module.split(".")
        return parts[2] if len(parts) > 2 and parts[1] == "backends" and parts[2] != "base" else None

    bad = [f"{m} -> {t}" for m, targets in sorted(EDGES.items()) if backend(m)
           for t in sorted(targets) if backend(t) and backend(t) != backend(m)]
    assert bad == []


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
