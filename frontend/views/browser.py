"""The object browser at any ref and time: databases, tables and views; a table's schema, properties,
partitioning, history and data preview, and the form that loads rows into it (a data job)."""

import dataclasses
import json

from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from catalog_app import table_schema
from catalog_app.engine.incoming import FILE_FORMATS
from catalog_app.job_specs import LOAD_FIELDS, LOAD_STRATEGIES, LoadSpec
from catalog_app.models import ObjectKind, Role
from catalog_app.selectors.objects import object_get, object_history, objects_at, schema_history
from catalog_app.selectors.refs import branch_list, ref_resolve, tag_list
from catalog_app.selectors.table_files import table_files
from catalog_app.services.commits import WriteTarget
from catalog_app.services.data_submit import table_load_submit, table_rows_read
from catalog_app.services.table_diff import table_diff_read
from frontend.views.common import get_catalog, page_number, ref_context, refused, ui_view, url_with
from lakeui.errors import ApplicationError
from lakeui.jobs.services import read_is_pending
from merge_app.services.restores import restore_submit

PAGE_SIZE = 20
LOAD_FORM_FIELDS = tuple(f for f in LOAD_FIELDS if f.metadata["kind"] != "partitions")  # a column name or names
MESSAGE_ROWS_JSON = 'Rows must be a JSON list of objects, e.g. [{{"id": 1}}]: {error}'


def _refs(catalog):
    return {"branches": list(branch_list(catalog=catalog)), "tags": list(tag_list(catalog=catalog))}


@ui_view
def browse(request: HttpRequest, catalog: str) -> HttpResponse:
    found = get_catalog(request, catalog)
    ref = ref_context(request, found)
    chain = ref.resolved.chain
    databases = []
    for database in objects_at(chain, kind=ObjectKind.DATABASE):
        tables = list(objects_at(chain, kind=ObjectKind.TABLE, parent_id=database.object_id))
        views = list(objects_at(chain, kind=ObjectKind.VIEW, parent_id=database.object_id))
        databases.append({"version": database, "tables": tables, "views": views})
    context = {"catalog": found, "ref": ref, "databases": databases, **_refs(found)}
    return render(request, "frontend/browse.html", context)


def _table(chain, database: str, table: str):
    db = object_get(chain, kind=ObjectKind.DATABASE, name=database)
    return db, object_get(chain, kind=ObjectKind.TABLE, name=table, parent_id=db.object_id)


@ui_view
def table_detail(request: HttpRequest, catalog: str, database: str, table: str) -> HttpResponse:
    found = get_catalog(request, catalog)
    ref = ref_context(request, found)
    chain = ref.resolved.chain
    db, version = _table(chain, database, table)
    state = version.state
    files = table_files(chain, table_id=version.object_id)
    context = {
        "catalog": found, "ref": ref, "database": db, "table": version,
        "columns": state["columns"],
        "partition_by": table_schema.column_names(state["columns"], state.get("partition_by", [])),
        "primary_key": table_schema.column_names(state["columns"], state.get("primary_key", [])),
        "properties": sorted(state.get("properties", {}).items()),
        "history": object_history(chain, object_id=version.object_id),
        "schemas": list(schema_history(chain, table_id=version.object_id)),
        "current_schema": state.get("schema_version_id"),
        "segments": len(files.segments),
        "deltas": sum(len(d) for d in files.deltas.values()),
        "stored_rows": sum(s.row_count for s in files.segments),
        "strategies": LOAD_STRATEGIES, "formats": FILE_FORMATS, "max_rows": settings.LAKEUI_MAX_ROWS,
        "load_fields": [_form_field(f) for f in LOAD_FORM_FIELDS],
        **_refs(found),
    }  # fmt: skip
    return render(request, "frontend/table.html", context)


@ui_view
@require_POST
def table_restore(request: HttpRequest, catalog: str, database: str, table: str) -> HttpResponse:
    """RESTORE TABLE from the table's history: one commit on the branch with the table as it was at `commit`."""
    found = get_catalog(request, catalog, Role.EDITOR)
    branch = request.POST.get("branch", "")
    try:
        job = restore_submit(
            catalog=found, branch=branch, database=database, table=table, commit=request.POST.get("commit", ""),
            user=request.user,
        )  # fmt: skip
    except ApplicationError as error:
        refused(request, error)
        return redirect(url_with(reverse("frontend:table", args=[found.name, database, table]), ref=branch))
    messages.success(request, f"Restore job submitted on branch {branch}.")
    return redirect("frontend:job", job_id=job.id)


@ui_view
def table_data_diff(request: HttpRequest, catalog: str, database: str, table: str) -> HttpResponse:
    """The table's rows added, deleted and changed from one ref (`from`) to another (`ref`), changed cells marked."""
    found = get_catalog(request, catalog)
    ref = ref_context(request, found)
    source = (request.GET.get("from") or "").strip()
    context = {"catalog": found, "ref": ref, "database": database, "table": table, "source": source, **_refs(found)}
    if source:
        try:
            result = table_diff_read(
                source=ref_resolve(catalog=found, ref=source), target=ref.resolved, database=database, table=table,
                user=request.user,
            )  # fmt: skip
        except ApplicationError as error:
            context["error"] = error
        else:
            if read_is_pending(result):  # a worker reads it: the page reads again once its job has finished
                context["reading"] = result["job"]
                return render(request, "frontend/table_diff.html", context)
            names = [c["name"] for c in result["columns"]]
            for row in result["rows"]:
                row["shown"] = [
                    {"before": None if row["before"] is None else row["before"][i],
                     "after": None if row["after"] is None else row["after"][i], "changed": name in row["cells"]}
                    for i, name in enumerate(names)
                ]  # fmt: skip
            context["result"] = result
    return render(request, "frontend/table_diff.html", context)


@ui_view
def table_rows(request: HttpRequest, catalog: str, database: str, table: str) -> HttpResponse:
    """A page of the table's rows, read here or by a worker (then the job's progress, read again once it has
    finished). A fragment for the table page's script, or a whole page."""
    found = get_catalog(request, catalog)
    ref = ref_context(request, found)
    page = page_number(request)
    context = {"catalog": found, "ref": ref, "database": database, "table": table, "page": page}
    try:
        result = table_rows_read(
            resolved=ref.resolved, database=database, table=table, page=page, page_size=PAGE_SIZE, user=request.user
        )
    except ApplicationError as error:
        context["error"] = error
    else:
        if read_is_pending(result):  # a worker reads it: the page (or the script) reads again once it has finished
            context["reading"] = result["job"]
        else:
            pages = max(1, -(-result["count"] // PAGE_SIZE))
            context.update(result=result, pages=pages, first_row=(page - 1) * PAGE_SIZE + 1)
    template = "frontend/rows_fragment.html" if request.GET.get("fragment") else "frontend/rows.html"
    return render(request, template, context)


def _many(field: dataclasses.Field) -> bool:
    return field.metadata["kind"] == "columns"


def _form_field(field: dataclasses.Field) -> dict:
    label, strategies = field.metadata["label"], ", ".join(field.metadata["strategies"])
    return {"name": field.name, "label": f"{label}{', comma-separated' if _many(field) else ''} ({strategies})"}


def _rows(text: str) -> list:
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as error:
        raise ApplicationError("invalid_rows", MESSAGE_ROWS_JSON.format(error=error)) from None
    if isinstance(rows, dict):
        rows = [rows]
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise ApplicationError("invalid_rows", MESSAGE_ROWS_JSON.format(error="not a list of objects"))
    return rows


def _load_input(request: HttpRequest) -> dict:
    """The load form as a request the spec reads (job_specs.LoadSpec.from_request): blank fields left out, key
    columns comma-separated, JSON rows parsed; a file, when given, is the source and the rows box is ignored."""
    data = {"strategy": request.POST.get("strategy", "")}
    for field in LOAD_FORM_FIELDS:
        value = request.POST.get(field.name, "").strip()
        if value:
            data[field.name] = [v.strip() for v in value.split(",") if v.strip()] if _many(field) else value
    upload = request.FILES.get("file")
    if upload is not None:
        data["file"] = upload
        data["format"] = request.POST.get("format", "")
    elif request.POST.get("rows", "").strip():
        data["rows"] = _rows(request.POST["rows"])
    if request.POST.get("query", "").strip():
        data["query"] = request.POST["query"].strip()
    return data


@ui_view
@require_POST
def table_load(request: HttpRequest, catalog: str, database: str, table: str) -> HttpResponse:
    """Submit a load job on the branch the form names (through the service the API calls), then show the job."""
    found = get_catalog(request, catalog, Role.EDITOR)
    branch = request.POST.get("branch", "")
    page = url_with(reverse("frontend:table", args=[found.name, database, table]), ref=branch)
    target = WriteTarget(
        catalog=found, branch=branch, author=request.user, message=request.POST.get("message", "")[:2000]
    )
    try:
        spec = LoadSpec.from_request(_load_input(request))
        job = table_load_submit(target=target, database=database, table=table, spec=spec)
    except ApplicationError as error:
        refused(request, error)
        return redirect(page + "#load")
    messages.success(request, f"Load job submitted on branch {branch}.")
    return redirect("frontend:job", job_id=job.id)
