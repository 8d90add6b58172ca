"""The typed specs of the merge jobs (merge_app/job_specs.py): what each submit service stores in a job's params
is read back by the worker as the same spec, and written again as the same params (a job queued by an older
process, whose params predate the specs, still runs)."""

import ast
import dataclasses
from pathlib import Path

import pytest

from catalog_app.services.databases import database_update
from catalog_app.services.refs import branch_create
from lakeui.jobs.models import Job
from lakeui.jobs.registry import job_kind_get
from merge_app.job_specs import (
    MERGE_JOB_SPECS,
    KeysSpec,
    MergeRequestPlanSpec,
    MergeSpec,
    PickSpec,
    QueueSpec,
    RestoreSpec,
)
from merge_app.services.diff_reads import keys_job_for
from merge_app.services.keys import KEYS_JOB
from merge_app.services.merge_requests import PLAN_JOB, merge_request_open
from merge_app.services.merges import MERGE_JOB, merge_submit
from merge_app.services.picks import PICK_JOB, pick_submit
from merge_app.services.queue import QUEUE_JOB, queue_kick
from merge_app.services.restores import RESTORE_JOB, restore_submit
from tests.support.catalogs import head, make_catalog, make_table, on

ROUND_TRIPS = [
    MergeSpec(catalog_id="c", source="dev", target="main"),
    MergeSpec(catalog_id="c", source="dev", target="main", dry_run=True, expected_heads={"source": "a", "target": "b"},
              resolution={"default": "source_wins"}, merge_request=7, audit={"merge_request": 3},
              override_checks={"reason": "hotfix", "by": "alice"}),
    MergeRequestPlanSpec(catalog_id="c", merge_request_id=4),
    MergeRequestPlanSpec(catalog_id="c", merge_request_id=4, resolution={"tables": {"sales.orders": "target_wins"}}),
    KeysSpec(catalog_id="c", source="a" * 32, target="b" * 32),
    PickSpec(catalog_id="c", kind="revert", branch="main", commits=("a", "b")),
    PickSpec(catalog_id="c", kind="cherry_pick", branch="main", commits=("a",), resolution={"default": "fail"}),
    RestoreSpec(catalog_id="c", branch="main", point="p"),
    RestoreSpec(catalog_id="c", branch="main", point="p", database="sales", table="orders"),
    QueueSpec(catalog_id="c", target="main"),
]  # fmt: skip


@pytest.mark.parametrize("spec", ROUND_TRIPS, ids=lambda spec: type(spec).__name__)
def test_a_spec_round_trips_through_the_jobs_params(spec):
    params = spec.to_params()
    assert type(spec).from_params(params) == spec
    assert MERGE_JOB_SPECS[spec.KIND].from_params(params) == spec
    assert all(value is not None for name, value in params.items() if name != "resolution")  # unset: left out


def test_one_spec_per_merge_job_kind_each_registered():
    assert set(MERGE_JOB_SPECS) == {MERGE_JOB, PLAN_JOB, KEYS_JOB, PICK_JOB, RESTORE_JOB, QUEUE_JOB}
    for kind in MERGE_JOB_SPECS:
        assert job_kind_get(kind) is not None  # merge_app/job_kinds.py registers a handler for it


def test_optional_fields_are_left_out_as_before_the_specs():
    assert MergeSpec(catalog_id="c", source="dev", target="main").to_params() == {
        "catalog_id": "c", "source": "dev", "target": "main", "dry_run": False,
    }  # fmt: skip
    assert RestoreSpec(catalog_id="c", branch="main", point="p").to_params() == {
        "catalog_id": "c", "branch": "main", "point": "p",
    }  # fmt: skip
    # A plan's resolution is kept even when there is none: the request compares it with its own.
    assert MergeRequestPlanSpec(catalog_id="c", merge_request_id=4).to_params()["resolution"] is None


@pytest.mark.django_db
def test_what_the_submit_services_store_is_read_back_as_their_specs(user):
    """The params each submit service writes (checked there) are the spec's: reading them back and writing them
    again gives the same params, so the worker reads what was submitted, field by field."""
    catalog = make_catalog(user=user)
    make_table(catalog)  # metadata only: the jobs are stored, never sent (this test's transaction never commits)
    branch_create(catalog=catalog, name="dev", source="main")
    database_update(target=on(catalog, "dev"), name="sales", set_properties={"x": "1"})
    point = head(catalog)
    jobs = [
        merge_submit(catalog=catalog, source="dev", target="main", user=user, dry_run=True,
                     expected_heads={"source": head(catalog, "dev"), "target": point},
                     resolution={"default": "source_wins"}),
        pick_submit(catalog=catalog, kind="cherry_pick", branch="main", commit=head(catalog, "dev"), user=user),
        restore_submit(catalog=catalog, branch="dev", commit=point, database="sales", table="orders", user=user),
        keys_job_for(catalog=catalog, source_head=head(catalog, "dev"), target_head=point, user=user),
    ]  # fmt: skip
    merge_request_open(catalog=catalog, source="dev", target="main", title="Two", author=user)
    jobs.append(Job.objects.get(kind=PLAN_JOB))
    queue_kick(catalog_id=catalog.id, target="main")
    jobs.append(Job.objects.get(kind=QUEUE_JOB))
    for job in jobs:
        spec = MERGE_JOB_SPECS[job.kind].from_params(job.params)
        assert spec.to_params() == job.params, job.kind
        assert spec.catalog_id == str(catalog.id)
    merge, pick, restore, keys, plan, queue = (MERGE_JOB_SPECS[job.kind].from_params(job.params) for job in jobs)
    assert (merge.dry_run, merge.resolution, merge.expected_heads["target"]) == (
        True,
        {"default": "source_wins"},
        point,
    )
    assert (pick.kind, pick.commits) == ("cherry_pick", (head(catalog, "dev"),))
    assert (restore.point, restore.database, restore.table) == (point, "sales", "orders")
    assert dataclasses.astuple(keys)[1:] == (head(catalog, "dev"), point)
    assert plan.merge_request_id is not None
    assert queue == QueueSpec(catalog_id=str(catalog.id), target="main")


def test_each_service_names_its_job_kind_by_its_spec():
    assert {MERGE_JOB: MergeSpec, PLAN_JOB: MergeRequestPlanSpec, KEYS_JOB: KeysSpec, PICK_JOB: PickSpec,
            RESTORE_JOB: RestoreSpec, QUEUE_JOB: QueueSpec} == MERGE_JOB_SPECS  # fmt: skip


# Checked on the source, as tests/lakeui/layout.py checks the layers: each merge job's params are declared once, in
# its spec, so no merge_app code builds a job's params as a dict or reads them by name.
ROOT = Path(__file__).resolve().parents[2]
SUBMITS = frozenset({"job_create", "job_started_for", "job_run_sync", "job_answered_by_caller"})
# Submissions still building their params by hand, by function: merge_submit is in merge_app/services/merges.py,
# which is being split (issue 37); it goes through MergeSpec with that change. The list only shrinks.
PENDING_SPECS: set[str] = set()


def _called(node: ast.Call) -> str | None:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _keyword(node: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in node.keywords if k.arg == name), None)


def _is_to_params(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to_params"


def raw_submissions(source: str) -> set[str]:
    """The functions of `source` that submit a merge job (any job but another app's kind named by a literal)
    with params that are not a spec's `to_params()`, directly or through a name bound to one in the function."""
    found, tree = set(), ast.parse(source)
    named = {  # module constants naming a kind by a literal, e.g. SELECT_JOB = "sql_select"
        target.id: node.value.value for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        for target in node.targets if isinstance(target, ast.Name)
    }  # fmt: skip
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        from_specs = {
            target.id for node in ast.walk(function) if isinstance(node, ast.Assign) and _is_to_params(node.value)
            for target in node.targets if isinstance(target, ast.Name)
        }  # fmt: skip
        for call in ast.walk(function):
            if not (isinstance(call, ast.Call) and _called(call) in SUBMITS):
                continue
            kind, params = _keyword(call, "kind"), _keyword(call, "params")
            if isinstance(kind, ast.Name) and kind.id in named:
                kind = ast.Constant(named[kind.id])
            if isinstance(kind, ast.Constant) and kind.value not in MERGE_JOB_SPECS:
                continue  # another app's job (merge_app/services/sql.py runs catalog_app's sql_select)
            if not (_is_to_params(params) or (isinstance(params, ast.Name) and params.id in from_specs)):
                found.add(function.name)
    return found


def test_the_checker_sees_a_raw_submission_and_passes_a_spec():
    raw = "def submit(c):\n    params = {'catalog_id': c}\n    return job_create(kind=X, params=params)\n"
    assert raw_submissions(raw) == {"submit"}
    assert raw_submissions("def s(c):\n    return job_create(kind=Q.KIND, params={'catalog_id': c})\n") == {"s"}
    spec = "def submit(c):\n    params = Q(catalog_id=c).to_params()\n    return job_create(kind=X, params=params)\n"
    assert raw_submissions(spec) == set()
    assert raw_submissions("def s(c):\n    return job_run_sync(kind='sql_select', params={'c': c})\n") == set()
    other = "SELECT = 'sql_select'\ndef s(c):\n    return job_create(kind=SELECT, params={'c': c})\n"
    assert raw_submissions(other) == set()
    own = "MERGE = 'branch_merge'\ndef s(c):\n    return job_create(kind=MERGE, params={'c': c})\n"
    assert raw_submissions(own) == {"s"}


def test_every_merge_job_is_submitted_through_its_spec():
    found = set()
    for path in sorted((ROOT / "merge_app").rglob("*.py")):
        found |= raw_submissions(path.read_text())
    assert found == PENDING_SPECS, "a raw params dict in merge_app, or one in PENDING_SPECS went through its spec"


def test_each_merge_job_kind_is_registered_by_its_spec_and_reads_its_params_through_it():
    """merge_app/job_kinds.py: `@job_kind(<Spec>.KIND)`, and the handler's params read once, by that spec."""
    tree = ast.parse((ROOT / "merge_app" / "job_kinds.py").read_text())
    registered = {}
    for function in tree.body:
        if not isinstance(function, ast.FunctionDef):
            continue
        kinds = [d.args[0] for d in function.decorator_list if isinstance(d, ast.Call) and _called(d) == "job_kind"]
        if not kinds:
            continue
        assert isinstance(kinds[0], ast.Attribute) and kinds[0].attr == "KIND", function.name
        spec = kinds[0].value.id
        uses = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == "params"]
        reads = [
            n for n in ast.walk(function) if isinstance(n, ast.Call) and _called(n) == "from_params"
            and isinstance(n.func.value, ast.Name) and n.func.value.id == spec
            and [a.id for a in n.args if isinstance(a, ast.Name)] == ["params"]
        ]  # fmt: skip
        assert (len(uses), len(reads)) == (1, 1), f"{function.name}: params read other than by {spec}.from_params"
        registered[spec] = function.name
    assert set(registered) == {spec.__name__ for spec in MERGE_JOB_SPECS.values()}
