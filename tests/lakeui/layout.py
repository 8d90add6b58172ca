"""The layer rules of docs/architecture.md#layers, checked on source text.

`check(sources)` takes `{path: source text}` (paths relative to the repository root, as `catalog_app/apis/x.py`)
and returns every break it finds as a `Violation`: the real tree (`tree_sources()`) and small snippets go through
the same code, so tests/lakeui/test_layout.py can show that each rule fires on a break and not on clean code.

Imports count wherever they are (inside functions too), relative imports are resolved, and
`importlib.import_module("...")` / `__import__("...")` with a literal name count as imports.
"""

import ast
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("lakeui", "catalog_app", "checks_app", "merge_app", "hooks_app", "frontend")
# What each package may import of the others: lakeui (settings, API plumbing, jobs) is the bottom, the UI the top.
MAY_IMPORT = {
    "lakeui": set(),
    "catalog_app": {"lakeui"},
    # merge checks judge a commit; the merge (above them) materialises its result and asks them
    "checks_app": {"lakeui", "catalog_app"},
    "merge_app": {"lakeui", "catalog_app", "checks_app"},
    # webhooks sit beside merge_app: what happens below reaches them through lakeui/events.py, not an import
    "hooks_app": {"lakeui", "catalog_app"},
    "frontend": {"lakeui", "catalog_app", "checks_app", "merge_app", "hooks_app"},
}
SPARK_ALLOWED = ("catalog_app.engine", "catalog_app.spark")  # the engine, and the module that builds the session
ENGINE = "catalog_app.engine"
ENGINE_FORBIDDEN = ("django", "rest_framework", "celery", "kombu")  # the engine is Django-free: plain values only
# The merge plan (merge_app/plan/: the planner and the rules it decides by) is pure as the engine is: plain values
# in, a plan out.
PURE = (ENGINE, "merge_app.plan")
# The plan decides on plain values without loading Spark or Arrow, not even through an engine module it imports
# (its column type facts are `catalog_app.engine.type_names`, plain Python).
PLAN = "merge_app.plan"
PLAN_FORBIDDEN = ("pyspark", "pyarrow")
# Interfaces: they take a request (views, APIs) or a job's params (job kinds, the task), call services and
# selectors, and shape the answer; they run no ORM query of their own.
INTERFACE_MODULES = (
    "lakeui.jobs.apis",
    "lakeui.jobs.tasks",
    "catalog_app.apis.",
    "merge_app.apis.",
    "frontend.views.",
    "catalog_app.job_kinds",
    "merge_app.job_kinds",
    "hooks_app.apis",
    "hooks_app.tasks",
    "checks_app.apis",
    "checks_app.job_kinds",
)
# QuerySet and related-manager methods: `<related manager>.<one of these>(...)` is a query. Left out: the names a
# dict or a set also has (`values`, `update`, `add`, ...), so that `files.deltas.values()` on a dict is not one;
# `get` counts with keyword arguments (`branches.get(name=...)`, not `deltas.get(key)`), `count` with none.
MANAGER_METHODS = frozenset(
    [
        "filter",
        "exclude",
        "all",
        "exists",
        "first",
        "last",
        "create",
        "delete",
        "values_list",
        "order_by",
        "select_related",
        "prefetch_related",
        "select_for_update",
        "aggregate",
        "annotate",
        "get_or_create",
        "update_or_create",
        "in_bulk",
        "iterator",
        "only",
        "defer",
        "distinct",
        "bulk_create",
        "bulk_update",
        "latest",
        "earliest",
        "none",
    ]
)
# Methods only a QuerySet has: a call of one is a query whatever it is called on.
QUERYSET_ONLY = frozenset(
    [
        "select_related",
        "prefetch_related",
        "select_for_update",
        "values_list",
        "annotate",
        "aggregate",
        "get_or_create",
        "update_or_create",
        "bulk_create",
        "bulk_update",
        "in_bulk",
    ]
)
LOOKUP_METHODS = frozenset({"filter", "exclude", "get"})  # with a `field__lookup=` keyword: a query
RELATION_FIELDS = frozenset({"ForeignKey", "ManyToManyField"})  # fields whose reverse accessor is a manager


@dataclass(frozen=True, order=True)
class Violation:
    rule: str
    module: str
    line: int
    detail: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.module}:{self.line}: {self.detail}"


@dataclass
class Module:
    name: str
    path: str
    is_package: bool
    tree: ast.Module

    @property
    def package(self) -> str:
        return self.name.split(".")[0]


def tree_sources(root: Path = ROOT) -> dict[str, str]:
    """Every module of the project packages (not migrations), as `{path: text}`."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" not in path.parts:
                found[str(path.relative_to(root))] = path.read_text()
    return found


def _module(path: str, text: str) -> Module:
    parts = Path(path).with_suffix("").parts
    is_package = parts[-1] == "__init__"
    return Module(".".join(parts[:-1] if is_package else parts), path, is_package, ast.parse(text, filename=path))


def modules_of(sources: Mapping[str, str]) -> dict[str, Module]:
    return {m.name: m for m in (_module(path, text) for path, text in sources.items())}


# Imports ---------------------------------------------------------------------------------------------------------


def _relative_base(module: Module, level: int) -> str:
    """The package a relative import of `level` dots starts from."""
    parts = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
    return ".".join(parts[: len(parts) - (level - 1)])


def _resolve(module: Module, name: str | None, level: int) -> str:
    if not level:
        return name or ""
    base = _relative_base(module, level)
    return f"{base}.{name}" if name else base


def _dynamic_import(node: ast.Call) -> str | None:
    """The literal module name of `importlib.import_module("x")`, `import_module(".x", "pkg")` or `__import__("x")`."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        return None
    target = first.value
    if target.startswith(".") and name == "import_module":
        package = (
            node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "package"), None)
        )
        if isinstance(package, ast.Constant) and isinstance(package.value, str):
            dots = len(target) - len(target.lstrip("."))
            base = package.value.split(".")
            base = base[: len(base) - (dots - 1)]
            return ".".join([*base, target.lstrip(".")]) if target.lstrip(".") else ".".join(base)
    return target


def imported_names(module: Module) -> Iterator[tuple[str, int]]:
    """Every dotted name `module` imports (and, for `from x import y`, also `x.y`), with its line."""
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, node.module, node.level)
            yield base, node.lineno
            yield from ((f"{base}.{alias.name}", node.lineno) for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.Call) and (target := _dynamic_import(node)):
            yield target, node.lineno


def module_imports(module: Module, modules: Mapping[str, Module]) -> dict[str, int]:
    """The project modules (by name) and outside packages (top-level name) that `module` imports, with a line."""
    found: dict[str, int] = {}
    for name, line in imported_names(module):
        if name.split(".")[0] not in PACKAGES:
            found.setdefault(name.split(".")[0], line)
            continue
        while name not in modules and "." in name:  # `from package.module import name`
            name = name.rsplit(".", 1)[0]
        if name != module.name and (name in modules or name in PACKAGES):
            found.setdefault(name, line)
    return found


def import_graph(modules: Mapping[str, Module]) -> dict[str, dict[str, int]]:
    return {name: module_imports(module, modules) for name, module in modules.items()}


# Rules -----------------------------------------------------------------------------------------------------------


def _layers(modules, graph) -> Iterator[Violation]:
    for name, imports in graph.items():
        package = name.split(".")[0]
        for imported, line in imports.items():
            other = imported.split(".")[0]
            if other in PACKAGES and other != package and other not in MAY_IMPORT.get(package, set()):
                yield Violation("layers", name, line, f"{package} imports {imported} (a layer above it)")


def _spark(modules, graph) -> Iterator[Violation]:
    for name, imports in graph.items():
        if "pyspark" in imports and not name.startswith(SPARK_ALLOWED):
            yield Violation("spark_outside_engine", name, imports["pyspark"], "imports pyspark")


def _reaches(graph: Mapping[str, Mapping[str, int]], start: str, wanted: tuple[str, ...]) -> list[str] | None:
    """An import path from `start` to one of the outside packages `wanted`, through project modules."""
    seen, todo = {start}, [[start]]
    while todo:
        path = todo.pop()
        for imported in sorted(graph.get(path[-1], {})):
            if imported in wanted:
                return [*path, imported]
            if imported in graph and imported not in seen:
                seen.add(imported)
                todo.append([*path, imported])
    return None


def _pure(name: str) -> bool:
    return any(name == pure or name.startswith(pure + ".") for pure in PURE)


def _engine(modules, graph) -> Iterator[Violation]:
    """The engine and the merge planner import no Django (nor DRF, Celery), directly or through a project module
    they import."""
    for name, imports in graph.items():
        if not _pure(name):
            continue
        for imported, line in imports.items():
            if imported in ENGINE_FORBIDDEN:
                yield Violation("engine_not_django_free", name, line, f"{name} imports {imported}")
            elif imported in graph and not _pure(imported) and (path := _reaches(graph, imported, ENGINE_FORBIDDEN)):
                yield Violation("engine_not_django_free", name, line, f"{name} imports " + " -> ".join(path))


def _plan(modules, graph) -> Iterator[Violation]:
    """The merge plan imports no pyspark nor pyarrow, directly or through a project module it imports."""
    for name, imports in graph.items():
        if not (name == PLAN or name.startswith(PLAN + ".")):
            continue
        for imported, line in imports.items():
            if imported in PLAN_FORBIDDEN:
                yield Violation("plan_loads_spark", name, line, f"{name} imports {imported}")
            elif imported in graph and (path := _reaches(graph, imported, PLAN_FORBIDDEN)):
                yield Violation("plan_loads_spark", name, line, f"{name} imports " + " -> ".join(path))


def _is_layer(name: str, layer: str) -> bool:
    return layer in name.split(".")


def _selectors(modules, graph) -> Iterator[Violation]:
    for name, imports in graph.items():
        if _is_layer(name, "selectors"):
            for imported, line in imports.items():
                if _is_layer(imported, "services"):
                    yield Violation("selector_imports_service", name, line, f"a selector imports {imported}")


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
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


def _cycles(modules, graph) -> Iterator[Violation]:
    for component in cycles(graph):
        first = component[0]
        nxt = next(m for m in component if m in graph[first])
        yield Violation("import_cycle", first, graph[first][nxt], " -> ".join(component))


# ORM queries -----------------------------------------------------------------------------------------------------


def related_managers(modules: Mapping[str, Module]) -> dict[str, str]:
    """Reverse accessors of the project's ForeignKey and ManyToManyField fields (`related_name`), each with the
    package whose model declares the field (the rows such a manager queries)."""
    found = {}
    for module in modules.values():
        if not _is_layer(module.name, "models"):
            continue
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Call) and _called(node) in RELATION_FIELDS:
                for keyword in node.keywords:
                    value = keyword.value
                    if keyword.arg == "related_name" and isinstance(value, ast.Constant) and value.value != "+":
                        found[value.value] = module.package
    return found


def _called(node: ast.Call) -> str | None:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _model_name(node: ast.expr) -> str | None:
    """The model class `node` names where `.objects` of it is a manager: `Catalog`, `models.Catalog`,
    `get_user_model()`."""
    if isinstance(node, ast.Name) and node.id[:1].isupper():
        return node.id
    if isinstance(node, ast.Attribute) and node.attr[:1].isupper():
        return node.attr
    if isinstance(node, ast.Call):
        return _called(node) or "<call>"
    return None


@dataclass(frozen=True)
class Query:
    line: int
    what: str
    model: str | None = None  # the model class named (for `X.objects`)
    base: ast.expr | None = None  # what `X` is (for `X.objects`)
    package: str | None = None  # the package whose rows a related manager queries


def queries(module: Module, related: Mapping[str, str]) -> Iterator[Query]:
    """The ORM queries written in `module`: `Model.objects`, a related manager's methods (`catalog.branches.filter`,
    `x.thing_set.all`), QuerySet-only methods, and lookups (`.filter(a__b=...)`)."""
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Attribute) and node.attr == "objects" and (model := _model_name(node.value)):
            yield Query(node.lineno, f"{model}.objects", model=model, base=node.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method, owner = node.func.attr, node.func.value
            managed = (
                method in MANAGER_METHODS
                or (method == "get" and node.keywords)
                or (method == "count" and not node.args and not node.keywords)
            )
            related_manager = isinstance(owner, ast.Attribute) and (
                owner.attr in related or owner.attr.endswith("_set")
            )
            if managed and related_manager:
                yield Query(node.lineno, f".{owner.attr}.{method}()", package=related.get(owner.attr))
                continue
            if method in QUERYSET_ONLY:
                yield Query(node.lineno, f".{method}()")
            elif method in LOOKUP_METHODS and any(k.arg and "__" in k.arg for k in node.keywords):
                yield Query(node.lineno, f".{method}(<lookup>)")


def _interfaces(modules, graph) -> Iterator[Violation]:
    related = related_managers(modules)
    for name, module in modules.items():
        if name.startswith(INTERFACE_MODULES) or name in {m.rstrip(".") for m in INTERFACE_MODULES}:
            for query in queries(module, related):
                yield Violation("interface_queries", name, query.line, f"{query.what} in an interface module")


def _foreign_models(module: Module) -> dict[str, str]:
    """Names bound in `module` to another project package's models (`from catalog_app.models import Catalog`), or
    to such a models module (`from catalog_app import models`), each with that package."""
    found = {}
    for node in ast.walk(module.tree):
        if isinstance(node, ast.ImportFrom):
            base = _resolve(module, node.module, node.level)
            parts = base.split(".")
            if parts[0] not in PACKAGES or parts[0] == module.package:
                continue
            for alias in node.names:
                if _is_layer(base, "models") or alias.name == "models":
                    found[alias.asname or alias.name] = parts[0]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] in PACKAGES and parts[0] != module.package and "models" in parts:
                    found[alias.asname or alias.name] = parts[0]
    return found


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _foreign(modules, graph) -> Iterator[Violation]:
    """Another app's rows are read through its selectors and written through its services, never queried here."""
    related = related_managers(modules)
    for name, module in modules.items():
        foreign = _foreign_models(module)
        for query in queries(module, related):
            if query.base is not None:
                owner = foreign.get(_root_name(query.base) or "")
            else:
                owner = query.package if query.package not in (None, module.package) else None
            if owner is not None:
                yield Violation("foreign_model_query", name, query.line, f"{query.what}: {owner}'s rows")


# No web thread waits for a job (issue 37): what a request starts on a worker, it answers with at once (the job to
# follow, or a read to make again). WEB_ENTRIES are where a request comes in; every project module they import,
# directly or not, runs in a web thread and calls none of JOB_WAITS.
WEB_ENTRIES = ("frontend.views", "frontend.urls", "lakeui.urls", "lakeui.api")
WEB_ENTRY_LAYERS = ("apis",)  # catalog_app.apis.*, merge_app.apis.*, checks_app.apis, hooks_app.apis, lakeui.jobs.apis
JOB_WAITS = frozenset({"job_run_sync", "job_result", "job_wait"})
# The deep health check proves Spark by a job it waits for, at most 5 s (then 202): the wait is what it measures
# (docs/operations.md#health), not a read a person waits for. The public report waits for nothing.
WEB_WAIT_ALLOWED = frozenset({"lakeui.jobs.health"})


def _web_entry(name: str) -> bool:
    return name.startswith(WEB_ENTRIES) or any(_is_layer(name, layer) for layer in WEB_ENTRY_LAYERS)


def web_reachable(graph: Mapping[str, Mapping[str, int]]) -> dict[str, list[str]]:
    """Each project module a web entry imports, directly or not, with one import path to it from an entry."""
    found = {name: [name] for name in graph if _web_entry(name)}
    todo = list(found)
    while todo:
        name = todo.pop()
        for imported in sorted(graph.get(name, {})):
            if imported in graph and imported not in found:
                found[imported] = [*found[name], imported]
                todo.append(imported)
    return found


def _web_waits(modules, graph) -> Iterator[Violation]:
    for name, path in web_reachable(graph).items():
        if name in WEB_WAIT_ALLOWED:
            continue
        for node in ast.walk(modules[name].tree):
            if isinstance(node, ast.Call) and _called(node) in JOB_WAITS:
                how = " -> ".join(path)
                yield Violation("web_waits_for_job", name, node.lineno, f"calls {_called(node)} (reached: {how})")


RULES = (_layers, _cycles, _spark, _engine, _plan, _selectors, _interfaces, _foreign, _web_waits)


def check(sources: Mapping[str, str]) -> list[Violation]:
    """Every break of the layer rules in `sources` (`{path: text}`)."""
    modules = modules_of(sources)
    graph = import_graph(modules)
    return sorted(v for rule in RULES for v in rule(modules, graph))
