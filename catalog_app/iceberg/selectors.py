"""What the Iceberg REST catalog reads: a ref's databases (namespaces) and tables, and a table's commits on the
ref as the plain values the engine writes Iceberg metadata from (engine/iceberg.py)."""

import uuid

from django.db.models import Max, QuerySet

from catalog_app.engine.iceberg import TableCommit, TableFile
from catalog_app.engine.segments import Column
from catalog_app.models import Catalog, Commit, DataFile, FileEntry, ObjectKind, ObjectVersion
from catalog_app.selectors.objects import object_find, objects_at
from catalog_app.selectors.refs import Chain, ResolvedRef, ref_resolve
from lakeui.errors import NotFoundError


def iceberg_ref(*, catalog: Catalog, ref: str) -> ResolvedRef:
    """The ref a catalog URI names (`/iceberg/{cat}/{ref}`): a branch, a tag or a commit id."""
    return ref_resolve(catalog=catalog, ref=ref)


def namespace_list(chain: Chain) -> QuerySet[ObjectVersion]:
    return objects_at(chain, kind=ObjectKind.DATABASE)


def namespace_get(chain: Chain, *, name: str) -> ObjectVersion:
    database = object_find(chain, kind=ObjectKind.DATABASE, name=name)
    if database is None:
        raise NotFoundError("database_not_found", f"Namespace does not exist: {name}")
    return database


def namespace_table_list(chain: Chain, *, database: ObjectVersion) -> QuerySet[ObjectVersion]:
    return objects_at(chain, kind=ObjectKind.TABLE, parent_id=database.object_id)


def namespace_table_get(chain: Chain, *, database: ObjectVersion, name: str) -> ObjectVersion:
    table = object_find(chain, kind=ObjectKind.TABLE, name=name, parent_id=database.object_id)
    if table is None:
        raise NotFoundError("table_not_found", f"Table does not exist: {database.name}.{name}")
    return table


def table_head_seq(chain: Chain, *, table_id: uuid.UUID) -> int:
    """The sequence number of the table's newest commit on the chain (a version of it or a file change): with the
    table, the key of its Iceberg metadata."""
    versions = ObjectVersion.objects.filter(chain.q(), object_id=table_id).aggregate(seq=Max("seq"))["seq"]
    files = FileEntry.objects.filter(chain.q(), table_id=table_id).aggregate(seq=Max("seq"))["seq"]
    return max(versions or 0, files or 0)


def table_head_commit(chain: Chain, *, table_id: uuid.UUID) -> Commit:
    seq = table_head_seq(chain, table_id=table_id)
    return Commit.objects.get(catalog_id=chain.commit.catalog_id, seq=seq)


def _columns(columns: list[dict]) -> tuple[Column, ...]:
    return tuple(Column.from_dict(c) for c in columns)


def table_commits(chain: Chain, *, table_id: uuid.UUID) -> list[TableCommit]:
    """Every commit of the table on the chain, oldest first, with the table's state after it and the files it
    added and removed (two queries, whatever the history's length)."""
    versions = list(
        ObjectVersion.objects.filter(chain.q(), object_id=table_id).select_related("commit").order_by("seq")
    )
    entries = list(
        FileEntry.objects.filter(chain.q(), table_id=table_id)
        .select_related("file", "file__schema_version", "schema_version", "commit")
        .order_by("seq", "id")
    )
    commits = {v.seq: v.commit for v in versions} | {e.seq: e.commit for e in entries}
    by_seq: dict[int, list[FileEntry]] = {}
    for entry in entries:
        by_seq.setdefault(entry.seq, []).append(entry)
    history, state, at = [], None, 0
    for seq in sorted(commits):
        while at < len(versions) and versions[at].seq <= seq:
            state, at = versions[at], at + 1
        if state is None or state.dropped:
            continue
        added, removed = [], []
        for entry in by_seq.get(seq, []):
            if entry.removed:
                removed.append(str(entry.file_id))
            else:
                added.append(_table_file(entry))
        commit = commits[seq]
        history.append(
            TableCommit(
                commit_id=commit.id, seq=seq, timestamp_ms=int(commit.created_at.timestamp() * 1000),
                columns=_columns(state.state["columns"]), partition_by=tuple(state.state.get("partition_by") or ()),
                added=tuple(added), removed=tuple(removed),
            )
        )  # fmt: skip
    return history


def _table_file(entry: FileEntry) -> TableFile:
    file = entry.file
    if file.kind == DataFile.Kind.DELTA:
        return TableFile(id=str(file.id), path=file.path, row_count=file.row_count, size_bytes=file.size_bytes,
                         segment_id=str(file.segment_id))  # fmt: skip
    schema = entry.schema_version or file.schema_version
    return TableFile(
        id=str(file.id), path=file.path, row_count=file.row_count, size_bytes=file.size_bytes,
        partition_values=dict(file.partition_values), written=_columns(schema.columns) if schema else (),
    )  # fmt: skip
