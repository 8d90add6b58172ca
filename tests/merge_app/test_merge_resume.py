"""A merge job whose worker died after it prepared its result: the next run publishes that result as it is, with no
plan and no Spark, if nothing moved; if anything did (either head, a file it wrote), it plans again and merges what
the branches hold then. Here the death is an exception raised where the publication would start (the real kill of
a worker's process group is tests/lakeui/jobs/test_job_recovery.py)."""

import os
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from catalog_app.models import Commit
from lakeui.jobs.models import Job
from merge_app.models import Merge
from merge_app.services import merges, pipeline
from tests.support.catalogs import head
from tests.support.check import assert_consistent
from tests.support.data import read, run_in_process
from tests.support.merges import keyed_both_changed, keyed_merged

pytestmark = pytest.mark.django_db(transaction=True)

ROWS = [{"id": i, "amount": i % 100, "region": f"r{i % 7}"} for i in range(300)]


class Died(BaseException):
    """The worker's death, where the first run would publish its prepared result."""


def _expected(main_moved: bool = False, dev_moved: bool = False) -> list[tuple]:
    """The merged rows (`keyed_merged`) after, moved, main set the region of the multiples of 11 to 'x' or dev added
    5 to the amounts of the multiples of 5."""
    return [
        (i, amount + (5 if dev_moved and i % 5 == 0 else 0), "x" if main_moved and i % 11 == 0 else region)
        for i, amount, region in keyed_merged(ROWS)
    ]


def _running_job(catalog) -> Job:
    """A merge job this process runs, as a worker would. Its heartbeat is set an hour ahead (no heartbeat thread runs
    here): a worker of the suite, recovering jobs whose heartbeat went stale, must not take it over meanwhile."""
    params = {"catalog_id": str(catalog.id), "source": "dev", "target": "main", "dry_run": False}
    return Job.objects.create(kind=merges.MERGE_JOB, params=params, status=Job.Status.RUNNING, worker="w/run1/a",
                              attempts=1, heartbeat_at=timezone.now() + timedelta(hours=1))  # fmt: skip


def _died_after_preparing(catalog, job, monkeypatch) -> dict:
    """Run the merge until it has prepared its result and would publish it; the job's checkpoint."""

    def die(*args, **kwargs):
        raise Died()

    with monkeypatch.context() as patched:
        patched.setattr(pipeline, "merge_published", die)
        with pytest.raises(Died):
            merges.branch_merge(catalog=catalog, source="dev", target="main", job=job)
    return Job.objects.get(id=job.id).checkpoint[pipeline.PREPARED]


def _rows(spark, catalog) -> list[tuple]:
    return [(r["id"], r["amount"], r["region"]) for r in read(spark, catalog).orderBy("id").collect()]


def test_a_prepared_merge_is_published_by_the_next_run_without_planning_again(spark, monkeypatch):
    catalog = keyed_both_changed(spark, ROWS)
    before, job = head(catalog), _running_job(catalog)
    prepared = _died_after_preparing(catalog, job, monkeypatch)
    assert head(catalog) == before  # nothing published
    assert prepared["written"]  # the merged rows' files
    planned = Merge.objects.get(id=prepared["merge"])
    assert (planned.status, planned.dry_run, planned.job, planned.commit_id) == (
        "planned",
        True,
        None,
        prepared["result"],
    )

    def no_plan(**kwargs):
        raise AssertionError("the next run planned the merge again")

    monkeypatch.setattr(merges, "merge_plan", no_plan)  # no plan, so no key comparison and no Spark job
    merge = merges.branch_merge(catalog=catalog, source="dev", target="main", job=Job.objects.get(id=job.id))

    assert (merge.id, merge.status, merge.dry_run, merge.job_id) == (planned.id, "merged", False, job.id)
    assert head(catalog) == prepared["result"] == merge.commit_id
    commit = Commit.objects.get(id=head(catalog))
    assert (commit.parent_id, commit.merge_parent_id, commit.job_id) == (before, head(catalog, "dev"), job.id)
    assert "resumed_ms" in merge.timings
    assert merge.log["files"] == planned.log["files"]  # the audit log the first run wrote
    assert _rows(spark, catalog) == _expected()
    assert_consistent(catalog.name)


@pytest.mark.parametrize("moved", ["target", "source", "written_file"])
def test_a_prepared_merge_is_planned_again_when_anything_moved(spark, monkeypatch, moved):
    """Never published if the target or the source moved since it was planned, or a file it wrote is gone: the next
    run plans again and merges what the branches hold then, exactly."""
    catalog = keyed_both_changed(spark, ROWS)
    job = _running_job(catalog)
    prepared = _died_after_preparing(catalog, job, monkeypatch)
    if moved == "target":
        run_in_process(spark, catalog, {"set": {"region": "'x'"}, "where": "id % 11 = 0"}, kind="table_update")
    elif moved == "source":
        run_in_process(spark, catalog, {"set": {"amount": "amount + 5"}, "where": "id % 5 = 0"}, kind="table_update",
                 branch="dev")  # fmt: skip
    else:
        os.remove(os.path.join(settings.LAKEUI_WAREHOUSE, prepared["written"][0]))
    before, dev_head = head(catalog), head(catalog, "dev")

    merge = merges.branch_merge(catalog=catalog, source="dev", target="main", job=Job.objects.get(id=job.id))

    assert merge.status == "merged" and merge.id != prepared["merge"]
    commit = Commit.objects.get(id=head(catalog))
    assert commit.id != prepared["result"] and (commit.parent_id, commit.merge_parent_id) == (before, dev_head)
    assert _rows(spark, catalog) == _expected(main_moved=moved == "target", dev_moved=moved == "source")
    unpublished = Merge.objects.get(id=prepared["merge"])  # the first run's plan, still naming its result
    assert (unpublished.status, unpublished.dry_run, unpublished.commit_id) == ("planned", True, prepared["result"])
    if moved != "written_file":
        assert_consistent(catalog.name)
