"""Helpers for merge tests: data changes run here on the test's Spark (the worker's code, in-process), merges
through the service, and reading what a branch holds."""

import os

from catalog_app.selectors.objects import object_find
from catalog_app.selectors.refs import ref_resolve
from catalog_app.services.data_submit import table_data_submit
from catalog_app.services.refs import branch_create, branch_delete
from lakeui.errors import ConflictError
from lakeui.jobs.models import Job
from lakeui.jobs.services import job_execute
from merge_app.models import Merge
from merge_app.services.merges import branch_merge
from tests.conftest import wait_for_job
from tests.support.catalogs import make_catalog, make_table, on
from tests.support.data import run_in_process


def change(catalog, kind, params, *, branch="main", database="sales", table="orders") -> Job:
    """Run a data job now, in this process (if a worker took it first, wait for that run)."""
    job = table_data_submit(target=on(catalog, branch), database=database, table=table, kind=kind, params=params)
    job_execute(job_id=str(job.id), worker="test-process")
    job = wait_for_job(job.id, timeout=240)
    assert job.status == "succeeded", f"{job.status}: {job.error_code} {job.error_message}"
    return job


def insert(catalog, rows, **kwargs) -> Job:
    return change(catalog, "table_load", {"strategy": "append_only", "rows": rows}, **kwargs)


def merge(catalog, source="dev", target="main", **kwargs) -> Merge:
    return branch_merge(catalog=catalog, source=source, target=target, **kwargs)


def table_at(catalog, ref="main", database="sales", table="orders"):
    """The table's version at a ref, or None if it has no such table."""
    chain = ref_resolve(catalog=catalog, ref=ref).chain
    db = object_find(chain, kind="database", name=database)
    return None if db is None else object_find(chain, kind="table", name=table, parent_id=db.object_id)


CONVERGE = float(os.environ.get("LAKEUI_MODEL_CONVERGE", "0.3"))  # the share of merges whose convergence is checked


def converges(catalog, *, source: str, target: str, rows) -> str | None:
    """docs/merge-semantics.md#merges-converge: after merging `source` into `target`, merging `target` back into `source` with nothing between
    leaves both with the same rows. Checked on copies of the two branches (new names at the same heads, deleted
    afterwards), so that the history being tested goes on as it was. `rows(branch)` reads a branch's rows as a
    sorted list. Returns what went wrong, or None."""
    copy_source, copy_target = f"converge-{source}", f"converge-{target}"
    branch_create(catalog=catalog, name=copy_source, source=source)
    branch_create(catalog=catalog, name=copy_target, source=target)
    try:
        try:
            branch_merge(catalog=catalog, source=copy_target, target=copy_source)
        except ConflictError as error:
            return f"merging {target} back into {source} was refused ({error.code}: {error.message})"
        back, there = rows(copy_source), rows(target)
        if back != there:
            only_back = sorted(set(back) - set(there))
            only_there = sorted(set(there) - set(back))
            return (
                f"{target} merged back into {source} holds other rows than {target}: only after the merge back "
                f"{only_back}, only on {target} {only_there}, {len(back)} vs {len(there)} rows"
            )
        return None
    finally:
        branch_delete(catalog=catalog, name=copy_source)
        branch_delete(catalog=catalog, name=copy_target)


def keyed_both_changed(spark, rows: list[dict]):
    """A primary-key table of `rows` ({id, amount, region}) on main that both branches then changed: dev adds 1000 to
    the even ids' amounts, main sets the region of the multiples of 3 to 'm'. Their merge compares keys and writes
    the merged rows on Spark (`keyed_merged` is what it gives). The catalog."""
    catalog = make_catalog()
    make_table(catalog, primary_key=["id"])
    run_in_process(spark, catalog, {"strategy": "append_only", "rows": rows})
    branch_create(catalog=catalog, name="dev", source="main")
    run_in_process(spark, catalog, {"set": {"amount": "amount + 1000"}, "where": "id % 2 = 0"}, kind="table_update",
             branch="dev")  # fmt: skip
    run_in_process(spark, catalog, {"set": {"region": "'m'"}, "where": "id % 3 = 0"}, kind="table_update")
    return catalog


def keyed_merged(rows: list[dict]) -> list[tuple]:
    """The (id, amount, region) rows of the merge of `keyed_both_changed`, by id."""
    return sorted((r["id"], r["amount"] + (1000 if r["id"] % 2 == 0 else 0), "m" if r["id"] % 3 == 0 else r["region"])
                  for r in rows)  # fmt: skip


def ancestors_of(commits) -> dict:
    """The models' commit graphs (`test_merge_model`, `test_key_model`): these commits and all their ancestors, by
    id (each has `id` and `parents`)."""
    seen, stack = {}, list(commits)
    while stack:
        current = stack.pop()
        if current.id not in seen:
            seen[current.id] = current
            stack += current.parents
    return seen
