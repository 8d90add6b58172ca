"""The layers of docs/architecture.md#layers, checked on the source (the checker is tests/lakeui/layout.py): which
package may import which, where Spark, Django and ORM queries may appear, no import cycle. Each rule is also run on
small snippets that break it, so that a checker that can no longer fail fails here."""

import pytest

from tests.lakeui.layout import check, cycles, tree_sources


def test_the_tree_keeps_the_layers():
    assert [str(v) for v in check(tree_sources())] == []


def test_the_checker_sees_every_module_and_the_job_kinds():
    sources = tree_sources()
    for path in (
        "catalog_app/engine/keys.py",
        "merge_app/services/merges.py",
        "frontend/views/diff.py",
        "catalog_app/job_kinds.py",
        "merge_app/job_kinds.py",
    ):
        assert path in sources
    assert not any("migrations" in path for path in sources)


# Each break, as the smallest tree that shows it: {path: source}. A clean counterpart follows each.
CLEAN = {
    "lakeui/__init__.py": "",
    "lakeui/errors.py": "class ApplicationError(Exception): ...\n",
    "catalog_app/__init__.py": "",
    "catalog_app/models.py": (
        "from django.db import models\n"
        "class Catalog(models.Model): ...\n"
        "class Branch(models.Model):\n"
        "    catalog = models.ForeignKey(Catalog, on_delete=models.CASCADE, related_name='branches')\n"
    ),
    "catalog_app/selectors.py": (
        "from catalog_app.models import Catalog\n"
        "def catalog_get(*, name):\n"
        "    return Catalog.objects.get(name=name)\n"
        "def branch_list(*, catalog):\n"
        "    return catalog.branches.filter(name__startswith='b')\n"
    ),
    "catalog_app/services.py": "from catalog_app.selectors import catalog_get\nfrom lakeui.errors import ApplicationError\n",
    "catalog_app/apis.py": (
        "from catalog_app import selectors\n"
        "def get(request, name):\n"
        "    catalog = selectors.catalog_get(name=name)\n"
        "    found = {'a': 1}.get('a')\n"
        "    return [b.name for b in selectors.branch_list(catalog=catalog)], request.data.get('x'), found\n"
    ),
    "catalog_app/job_kinds.py": "from catalog_app.selectors import catalog_get\n",
    "catalog_app/engine/__init__.py": "",
    "catalog_app/engine/reads.py": "import pyarrow\nfrom catalog_app.engine import writes\nfrom . import writes as w\n",
    "catalog_app/engine/writes.py": "import json\n",
    "catalog_app/engine/frames.py": "from pyspark.sql import types as T\n",
    "merge_app/plan/__init__.py": "",
    "merge_app/plan/rules.py": "from catalog_app.engine.writes import json\n",
    "merge_app/__init__.py": "",
    "merge_app/models.py": "from django.db import models\nfrom catalog_app.models import Catalog\n",
    "merge_app/selectors.py": "from catalog_app.selectors import catalog_get\nfrom merge_app.models import Catalog\n",
    "merge_app/services.py": "from merge_app.selectors import catalog_get\nfrom . import selectors\n",
    "frontend/__init__.py": "",
    "frontend/views.py": "from catalog_app.selectors import catalog_get\nfrom merge_app import services\n",
}

BREAKS = {
    "an upward import_module": (
        "catalog_app/services.py",
        "import importlib\ndef plan():\n    return importlib.import_module('merge_app.services')\n",
        "layers",
    ),
    "an upward relative import_module": (
        "catalog_app/services.py",
        "from importlib import import_module\nmerge = import_module('.services', package='merge_app')\n",
        "layers",
    ),
    "an upward import inside a function": (
        "catalog_app/services.py",
        "def plan():\n    from merge_app.services import catalog_get\n",
        "layers",
    ),
    "Model.objects in a view": (
        "catalog_app/apis.py",
        "from catalog_app import models\ndef get(request, name):\n    return models.Catalog.objects.get(name=name)\n",
        "interface_queries",
    ),
    "a bare Model.objects in a job kind": (
        "catalog_app/job_kinds.py",
        "from catalog_app.models import Catalog\ndef run(params, progress):\n"
        "    return Catalog.objects.get(id=params['catalog_id'])\n",
        "interface_queries",
    ),
    "a related-manager query in a view": (
        "catalog_app/apis.py",
        "from catalog_app import selectors\ndef get(request, name):\n"
        "    return selectors.catalog_get(name=name).branches.filter(name='main')\n",
        "interface_queries",
    ),
    "a related-manager get in a view": (
        "catalog_app/apis.py",
        "def get(request, catalog):\n    return catalog.branches.get(name='main')\n",
        "interface_queries",
    ),
    "a queryset method in a view": (
        "catalog_app/apis.py",
        "from catalog_app import selectors\ndef get(request, chain):\n"
        "    return selectors.branch_list(catalog=chain).select_related('head')\n",
        "interface_queries",
    ),
    "Django imported by the engine": (
        "catalog_app/engine/writes.py",
        "from django.conf import settings\n",
        "engine_not_django_free",
    ),
    "Django reached by the engine through a project module": (
        "catalog_app/engine/writes.py",
        "from catalog_app.models import Catalog\n",
        "engine_not_django_free",
    ),
    "the ORM reached by the merge planner": (
        "merge_app/plan/objects.py",
        "from catalog_app.models import Catalog\n",
        "engine_not_django_free",
    ),
    "pyspark imported by the merge plan": (
        "merge_app/plan/rules.py",
        "from pyspark.sql import types\n",
        "plan_loads_spark",
    ),
    "Spark reached by the merge plan through an engine module": (
        "merge_app/plan/rules.py",
        "from catalog_app.engine.frames import T\n",
        "plan_loads_spark",
    ),
    "a selector importing a service": (
        "merge_app/selectors.py",
        "from catalog_app.services import catalog_get\n",
        "selector_imports_service",
    ),
    "a cycle through relative imports": (
        "catalog_app/engine/writes.py",
        "from .reads import pyarrow\n",
        "import_cycle",
    ),
    "a cycle through a package's relative import": (
        "catalog_app/engine/__init__.py",
        "from . import reads\n",
        "import_cycle",
    ),
    "another app's models queried": (
        "merge_app/services.py",
        "from catalog_app.models import Catalog\ndef lock(catalog):\n"
        "    return Catalog.objects.select_for_update().get(id=catalog.id)\n",
        "foreign_model_query",
    ),
    "another app's rows through a related manager": (
        "merge_app/services.py",
        "def heads(catalog):\n    return catalog.branches.all()\n",
        "foreign_model_query",
    ),
    "Spark outside the engine": (
        "merge_app/services.py",
        "from pyspark.sql import functions as F\n",
        "spark_outside_engine",
    ),
}


def test_a_clean_tree_passes():
    assert check(CLEAN) == []


@pytest.mark.parametrize("name", BREAKS)
def test_each_break_is_reported(name):
    path, text, rule = BREAKS[name]
    found = check({**CLEAN, path: CLEAN.get(path, "") + text})
    assert rule in {v.rule for v in found}, found
    module = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    assert any(v.module == module or rule == "import_cycle" for v in found if v.rule == rule)


def test_a_break_added_to_the_real_tree_is_reported():
    sources = tree_sources()
    path = "catalog_app/services/refs.py"
    sources[path] += "\ndef _merge():\n    return __import__('merge_app.services.merges')\n"
    path = "frontend/views/catalogs.py"
    sources[path] += "\ndef _page(catalog):\n    return catalog.branches.filter(name='main')\n"
    found = {(v.rule, v.module) for v in check(sources)}
    assert {("layers", "catalog_app.services.refs"), ("interface_queries", "frontend.views.catalogs")} <= found


def test_cycles_are_the_strongly_connected_components():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


# No web thread waits for a job (issue 37): the rule `web_waits_for_job`.
WAITS = {
    "a service a view calls waits for its job": (
        "merge_app/services.py",
        "from lakeui.jobs.services import job_run_sync\ndef read(*, params, user):\n"
        "    return job_run_sync(kind='x', params=params, requested_by=user, timeout=60)\n",
        "merge_app.services",
    ),
    "a selector a service imports polls a job": (
        "catalog_app/selectors.py",
        "from lakeui.jobs import services\ndef rows(job):\n    return services.job_wait(job, timeout=5).result\n",
        "catalog_app.selectors",
    ),
    "a view waits for a job's result": (
        "frontend/views.py",
        "from lakeui.jobs.services import job_result\ndef page(request, job):\n    return job_result(job, timeout=5)\n",
        "frontend.views",
    ),
}


@pytest.mark.parametrize("name", WAITS)
def test_a_wait_for_a_job_in_a_web_path_is_reported(name):
    path, text, module = WAITS[name]
    found = check({**CLEAN, path: CLEAN.get(path, "") + text})
    assert [(v.rule, v.module) for v in found] == [("web_waits_for_job", module)], found


def test_a_worker_may_wait_where_no_request_reaches():
    """A job kind, which no view imports, is not a web path: the rule stays quiet there."""
    text = (
        "from lakeui.jobs.services import job_wait\ndef run(params, progress):\n    return job_wait(None, timeout=1)\n"
    )
    assert check({**CLEAN, "catalog_app/job_kinds.py": CLEAN["catalog_app/job_kinds.py"] + text}) == []


def test_the_former_blocking_read_is_reported_in_the_real_tree():
    """The SQL console's Spark SELECT as it was before issue 37 (waiting on job_run_sync) breaks the rule where it
    sits, three imports below the console's view."""
    sources = tree_sources()
    path = "merge_app/services/sql.py"
    sources[path] += (
        "\ndef _select_waited(context, params):\n    from lakeui.jobs.services import job_run_sync\n"
        "    return job_run_sync(kind='sql_select', params=params, requested_by=context.user, timeout=120)\n"
    )
    found = [v for v in check(sources) if v.rule == "web_waits_for_job"]
    assert [v.module for v in found] == ["merge_app.services.sql"], found
    assert "job_run_sync" in found[0].detail
