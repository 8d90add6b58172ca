"""The production job kinds. Each is glue: plain values in, a service or engine call, a JSON result out."""

import logging
import time
import uuid
from typing import Any

from django.conf import settings

from catalog_app.engine import gc, session, smoke, sql
from catalog_app.engine.warehouse import Warehouse
from catalog_app.job_specs import (
    TABLE_JOB_SPECS,
    CatalogGcSpec,
    LoadSpec,
    RowsPageSpec,
    StoredFiles,
    TableJobSpec,
    TableTarget,
)
from catalog_app.models import Commit
from catalog_app.selectors.objects import object_by_id
from catalog_app.selectors.refs import catalog_by_id, commit_by_id, commit_chain, commit_of_job, commit_operations
from catalog_app.selectors.table_files import data_file_paths
from catalog_app.selectors.table_rows import rows_page, select_frame
from catalog_app.services.data_changes import CHANGES, data_change_run
from catalog_app.services.load_changes import load_change, staged_remove
from catalog_app.services.retention import EXPIRE_JOB, retention_expire
from catalog_app.services.table_diff import TABLE_DIFF_JOB, table_diff
from catalog_app.spark import spark_session
from lakeui.errors import ApplicationError, ConflictError, NotFoundError
from lakeui.jobs.health import SPARK_CHECK
from lakeui.jobs.registry import ClaimLost, JobFailure, Progress, job_failure_explainer, job_kind
from lakeui.jobs.selectors import job_of_run
from lakeui.lineage import Dataset, Lineage, job_lineage

# A data job the table changed under (409 concurrent_change at commit) reads it again and re-plans this many times.
REPLANS = 3

logger = logging.getLogger(__name__)

MESSAGE_ENGINE_LOST = (
    "The worker's Spark engine stopped (for example it ran out of memory) while the job ran; the worker starts a "
    "new one for the next job. Run the job again, on less data if it keeps happening."
)
MESSAGE_ENGINE_ERROR = "Spark could not do the job's work: {error}"


@job_failure_explainer
def spark_failure(exc: BaseException) -> JobFailure | None:
    """Any job's failure in Spark, merges' included: the engine lost (a new one is started for the next job), or
    an error Spark raised."""
    if session.engine_lost(exc):
        return JobFailure("engine_lost", MESSAGE_ENGINE_LOST)
    if session.spark_error(exc):
        return JobFailure("engine_error", MESSAGE_ENGINE_ERROR.format(error=sql.error_message(exc)))
    return None


@job_kind(SPARK_CHECK, interactive=True)
def spark_check(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    progress.report(10, "Starting Spark")
    spark = spark_session()
    progress.report(50, "Running a Spark job")
    return smoke.spark_roundtrip(spark, rows=int(params.get("rows", 1000)))


def _figures_of(commit: Commit) -> dict[str, Any]:
    """The result figures of a data commit, summed over its operations (a segment read by two counts twice)."""
    figures: dict[str, Any] = {}
    for operation in commit_operations(commit):
        for key, value in operation.details.items():
            if key == "strategy":
                figures[key] = value
            elif key.startswith(("rows_", "segments_", "bytes_", "delta_files_")) and isinstance(value, int):
                figures[key] = figures.get(key, 0) + value
    return figures


def _table_change(kind: str):
    make = load_change if kind == LoadSpec.KIND else CHANGES[kind]

    def run(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
        """A load's own files (an upload, a staging folder: `staged`) are removed once the job has an outcome,
        for every format and entry point (not when another delivery took it over, which still reads them; a crash
        leaves them to garbage collection)."""
        target, spec = TableTarget.from_params(params), TABLE_JOB_SPECS[kind].from_params(params)
        finished = True
        try:
            return run_once(target, spec, progress)
        except ClaimLost:
            finished = False
            raise
        finally:
            if finished and isinstance(spec, LoadSpec) and isinstance(spec.source, StoredFiles) and spec.source.staged:
                _staged_cleanup(spec)

    def run_once(target: TableTarget, spec: TableJobSpec, progress: Progress) -> dict[str, Any]:
        job = job_of_run(progress.job_id)
        done = commit_of_job(job)
        if done is not None:  # delivered again after its commit: report that commit, do not write twice
            return {"commit": done.id, **_figures_of(done)}
        message = target.message or f"{spec.VERB} {target.database}.{target.table}"
        for replan in range(REPLANS + 1):
            try:
                return data_change_run(
                    target=target, spec=spec, make=make, spark=spark_session, job=job, message=message,
                    tag=f"{job.id.hex}-{job.attempts}-{replan}", progress=progress,
                )  # fmt: skip
            except ConflictError as exc:  # the table changed under the job: read it again and plan anew
                if exc.code != "concurrent_change" or replan == REPLANS:
                    raise
                progress.report(5, "The table changed meanwhile: reading it again")
        raise AssertionError("unreachable")

    return run


def _staged_cleanup(spec: LoadSpec) -> None:
    """Best effort: a failure here must not hide the job's own outcome; garbage collection removes what is left."""
    try:
        staged_remove(Warehouse(settings.LAKEUI_WAREHOUSE), spec)
    except Exception:
        logger.warning("Could not remove the staged files %s; GC will", spec.source.path, exc_info=True)


for _kind in TABLE_JOB_SPECS:
    job_kind(_kind)(_table_change(_kind))


@job_lineage(*TABLE_JOB_SPECS)
def table_change_lineage(params: dict[str, Any], result: dict[str, Any] | None) -> Lineage:
    """A data job's OpenLineage datasets (lakeui/lineage.py): the table it writes on its branch."""
    target = TableTarget.from_params(params)
    facts = {"commit": result["commit"]} if result else {}
    written = [Dataset(target.branch, f"{target.database}.{target.table}")]
    return Lineage(catalog_by_id(target.catalog_id), outputs=written, facts=facts)


@job_kind(TABLE_DIFF_JOB, interactive=True)
def table_diff_job(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    progress.report(10, "Comparing the table's rows")
    return table_diff(spark_session(), params)


@job_kind(RowsPageSpec.KIND, interactive=True)
def table_rows(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    spec = RowsPageSpec.from_params(params)
    commit = commit_by_id(spec.commit)
    chain = commit_chain(commit)
    table = object_by_id(chain, object_id=uuid.UUID(spec.table_id))
    if table is None or table.dropped:
        raise NotFoundError("table_not_found", "The table does not exist at this ref.")
    spark = spark_session()
    with session.cancelled_on_error(spark):
        return rows_page(chain, table, page=spec.page, page_size=spec.page_size, spark=spark)


@job_kind("sql_select", interactive=True)
def sql_select(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    commit = commit_by_id(params["commit"])
    limit = min(int(params.get("limit", 1000)), sql.MAX_SELECT_ROWS)
    spark = spark_session()
    with session.cancelled_on_error(spark):  # past its time limit (LAKEUI_INTERACTIVE_TIME_LIMIT) too
        frame = select_frame(
            spark, catalog=commit.catalog, chain=commit_chain(commit), statement=params["statement"],
            warehouse=Warehouse(settings.LAKEUI_WAREHOUSE), limit=limit + 1,
        )  # fmt: skip
        try:
            return sql.selected_rows(frame, limit)
        except sql.QueryFailed as exc:  # the user's query threw: their error; the trace in the log
            logger.warning("SQL query of job %s failed", progress.job_id, exc_info=True)
            raise ApplicationError("sql_error", f"The query failed: {exc.message}", status=400) from None


@job_kind(CatalogGcSpec.KIND)
def catalog_gc(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Remove files under the catalog's folder that no commit references and that are older than the grace
    period (files of failed or killed jobs, spent uploads). Files any commit references are kept, whichever
    refs still reach them."""
    spec = CatalogGcSpec.from_params(params)
    grace = spec.grace_seconds
    if grace <= 0:
        raise ApplicationError("invalid_grace_period", "The grace period must be more than 0 seconds.")
    catalog = catalog_by_id(spec.catalog_id)  # a catalog that is gone has no files to collect
    collected = gc.unreferenced_remove(
        spark_session(), Warehouse(settings.LAKEUI_WAREHOUSE), str(catalog.id), referenced=data_file_paths(catalog.id),
        cutoff_ms=(time.time() - grace) * 1000,
    )  # fmt: skip
    return {
        "files_removed": len(collected.removed),
        "bytes_removed": collected.removed_bytes,
        "files_kept": collected.kept,
        "removed": collected.removed[:1000],
    }


@job_kind(EXPIRE_JOB)
def retention_expire_job(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Expire the catalog's history by its retention rules (docs/retention.md); GC then removes the files."""
    progress.report(10, "Planning by the retention rules")
    return retention_expire(catalog=catalog_by_id(params["catalog_id"])).as_dict()
