"""The layers of README.md's Layout section, checked on the source: which package may import which, where Spark
and ORM queries may appear, and no import cycle. Imports inside functions count as much as those at the top."""

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("lakeui", "catalog_app", "merge_app", "frontend")
# What each package may import of the others: lakeui (settings, API plumbing) is the bottom, the UI the top.
MAY_IMPORT = {
    "lakeui": set(),
    "catalog_app": {"lakeui"},
    "merge_app": {"lakeui", "catalog_app"},
    "frontend": {"lakeui", "catalog_app", "merge_app"},
}
SPARK_ALLOWED = ("catalog_app.engine", "catalog_app.spark")  # the engine, and the module that builds the session
VIEW_MODULES = ("lakeui.jobs.apis", "catalog_app.apis.", "merge_app.apis.", "frontend.views.")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _imported(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def _imports(module: str) -> set[str]:
    """The project modules and the outside packages (top-level name) that `module` imports."""
    found = set()
    for name in _imported(ast.parse(MODULES[module].read_text())):
        if name.split(".")[0] not in PACKAGES:
            found.add(name.split(".")[0])
            continue
        while name not in MODULES and "." in name:  # `from package.module import name`
            name = name.rsplit(".", 1)[0]
        if name in MODULES and name != module:
            found.add(name)
    return found


GRAPH = {module: _imports(module) for module in MODULES}


def test_each_package_imports_only_the_layers_below_it():
    wrong = sorted(
        (module, imported)
        for module, imports in GRAPH.items()
        for imported in imports
        if imported.split(".")[0] in PACKAGES
        and imported.split(".")[0] != module.split(".")[0]
        and imported.split(".")[0] not in MAY_IMPORT[module.split(".")[0]]
    )
    assert wrong == []


def test_no_import_cycle():
    cycles = _cycles(GRAPH)
    assert cycles == []


def test_spark_is_used_only_by_the_engine():
    outside = sorted(m for m, imports in GRAPH.items() if "pyspark" in imports and not m.startswith(SPARK_ALLOWED))
    assert outside == []


def test_api_and_ui_views_run_no_orm_query_of_their_own():
    querying = sorted(
        f"{module}:{node.lineno}"
        for module, path in MODULES.items()
        if module.startswith(VIEW_MODULES)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr == "objects" and _model(node.value)
    )
    assert querying == []


def _model(node: ast.expr) -> bool:
    """Whether `node` names a model class (`Catalog`, `get_user_model()`): what `.objects` of it queries."""
    return isinstance(node, ast.Call) or (isinstance(node, ast.Name) and node.id[:1].isupper())


def test_the_checks_see_every_module():
    assert {"catalog_app.engine.keys", "merge_app.services.merges", "frontend.views.diff"} <= set(GRAPH)
    assert "merge_app.models" in GRAPH["merge_app.services.merges"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    named = [_model(ast.parse(text).body[0].value) for text in ("Job", "get_user_model()", "diff")]
    assert named == [True, True, False]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph.get(node, ()):
            if other not in graph:
                continue
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)
