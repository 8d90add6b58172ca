"""The typed specs of the merge jobs (merge_app/job_specs.py): what each submit service stores in a job's params
is read back by the worker as the same spec, and written again as the same params (a job queued by an older
process, whose params predate the specs, still runs)."""

import dataclasses

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
from merge_app.services.queue import QUEUE_JOB
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
    for job in jobs:
        spec = MERGE_JOB_SPECS[job.kind].from_params(job.params)
        assert spec.to_params() == job.params, job.kind
        assert spec.catalog_id == str(catalog.id)
    merge, pick, restore, keys, plan = (MERGE_JOB_SPECS[job.kind].from_params(job.params) for job in jobs)
    assert (merge.dry_run, merge.resolution, merge.expected_heads["target"]) == (
        True,
        {"default": "source_wins"},
        point,
    )
    assert (pick.kind, pick.commits) == ("cherry_pick", (head(catalog, "dev"),))
    assert (restore.point, restore.database, restore.table) == (point, "sales", "orders")
    assert dataclasses.astuple(keys)[1:] == (head(catalog, "dev"), point)
    assert plan.merge_request_id is not None
