"""What the Iceberg REST catalog reads: a ref's databases (namespaces) and tables, and a table's commits on the
ref as the plain values the engine writes Iceberg metadata from (engine/iceberg.py)."""

import uuid

from django.db.models import Max, QuerySet

from catalog_app.engine.iceberg import TableCommit, TableFile
from catalog_app.engine.segments import Column
from catalog_app.models import (
    Catalog,
    Commit,
    DataFile,
    ExpiredCommit,
    FileEntry,
    ObjectKind,
    ObjectVersion,
    SchemaVersion,
)
from catalog_app.selectors.objects import objects_at
from catalog_app.selectors.refs import Chain, ResolvedRef, ref_resolve
from lakeui.errors import NotFoundError


def iceberg_ref(*, catalog: Catalog, ref: str) -> ResolvedRef:
    """The ref a catalog URI names (`/iceberg/{cat}/{ref}`): a branch, a tag or a commit id."""
    return ref_resolve(catalog=catalog, ref=ref)


def namespace_list(chain: Chain) -> QuerySet[ObjectVersion]:
    return objects_at(chain, kind=ObjectKind.DATABASE)


def _live_named(chain: Chain, *, kind: str, name: str, parent_id: uuid.UUID | None = None) -> ObjectVersion | None:
    """The live object of `kind` named `name` at the chain: what `object_find` answers, found from the versions of
    that name (index on catalog and name) and each candidate's newest version (index on object and seq), so a table
    with thousands of versions costs a few index probes, not one per version (selectors/objects.py)."""
    named = ObjectVersion.objects.filter(chain.q(), catalog_id=chain.commit.catalog_id, kind=kind, name=name)
    if parent_id is not None:
        named = named.filter(parent_id=parent_id)
    candidates = named.values("object_id").annotate(top=Max("seq")).order_by("-top").values_list("object_id", flat=True)
    for object_id in candidates[:20]:
        newest = ObjectVersion.objects.filter(chain.q(), object_id=object_id).order_by("-seq").first()
        if (
            newest is not None
            and not newest.dropped
            and newest.name == name
            and (parent_id is None or newest.parent_id == parent_id)
        ):
            return newest
    return None


def namespace_get(chain: Chain, *, name: str) -> ObjectVersion:
    database = _live_named(chain, kind=ObjectKind.DATABASE, name=name)
    if database is None:
        raise NotFoundError("database_not_found", f"Namespace does not exist: {name}")
    return database


def namespace_table_list(chain: Chain, *, database: ObjectVersion) -> QuerySet[ObjectVersion]:
    return objects_at(chain, kind=ObjectKind.TABLE, parent_id=database.object_id)


def namespace_table_find(chain: Chain, *, database: ObjectVersion, name: str) -> ObjectVersion | None:
    return _live_named(chain, kind=ObjectKind.TABLE, name=name, parent_id=database.object_id)


def namespace_table_get(chain: Chain, *, database: ObjectVersion, name: str) -> ObjectVersion:
    table = namespace_table_find(chain, database=database, name=name)
    if table is None:
        raise NotFoundError("table_not_found", f"Table does not exist: {database.name}.{name}")
    return table


def table_head(chain: Chain, *, table_id: uuid.UUID) -> tuple[int, str]:
    """The sequence number and id of the table's newest commit on the chain (a version of it or a file change): with
    the table, the key of its Iceberg metadata: two index probes, each reading one row of an index from its end."""
    versions = ObjectVersion.objects.filter(chain.q(), object_id=table_id).order_by("-seq")
    files = FileEntry.objects.filter(chain.q(), table_id=table_id).order_by("-seq")
    newest = [query.values_list("seq", "commit_id").first() for query in (versions, files)]
    return max(found for found in newest if found is not None)


def _columns(columns: list[dict]) -> tuple[Column, ...]:
    return tuple(Column.from_dict(c) for c in columns)


def table_commits(chain: Chain, *, table_id: uuid.UUID) -> list[TableCommit]:
    """Every commit of the table on the chain, oldest first, with the table's state after it and the files it
    added and removed (four queries, whatever the history's length; rows read as values, not models)."""
    versions = list(
        ObjectVersion.objects.filter(chain.q(), object_id=table_id)
        .order_by("seq")
        .values_list("seq", "commit_id", "dropped", "state")
    )
    entries = list(
        FileEntry.objects.filter(chain.q(), table_id=table_id)
        .order_by("seq", "id")
        .values_list(
            "seq", "commit_id", "removed", "schema_version_id", "file_id", "file__kind", "file__path",
            "file__row_count", "file__size_bytes", "file__partition_values", "file__segment_id",
            "file__schema_version_id", "file__stats",
        )
    )  # fmt: skip
    schema_ids = {e[3] or e[11] for e in entries} - {None}
    schemas = {i: _columns(c) for i, c in SchemaVersion.objects.filter(id__in=schema_ids).values_list("id", "columns")}
    commit_ids = {v[1] for v in versions} | {e[1] for e in entries}
    times = dict(Commit.objects.filter(id__in=commit_ids).values_list("id", "created_at"))
    expired = set(ExpiredCommit.objects.filter(commit_id__in=commit_ids).values_list("commit_id", flat=True))
    seqs = sorted({v[0]: None for v in versions} | {e[0]: None for e in entries})
    commit_of = {v[0]: v[1] for v in versions} | {e[0]: e[1] for e in entries}
    by_seq: dict[int, list[tuple]] = {}
    for entry in entries:
        by_seq.setdefault(entry[0], []).append(entry)
    history, state, at = [], None, 0
    columns, partition_by, last_state = (), (), None
    for seq in seqs:
        while at < len(versions) and versions[at][0] <= seq:
            state, at = versions[at], at + 1
        if state is None or state[2]:
            continue
        if state[3] is not last_state:
            columns, partition_by = _columns(state[3]["columns"]), tuple(state[3].get("partition_by") or ())
            last_state = state[3]
        added, removed = [], []
        for entry in by_seq.get(seq, []):
            if entry[2]:
                removed.append(str(entry[4]))
            else:
                added.append(_table_file(entry, schemas))
        commit_id = commit_of[seq]
        history.append(
            TableCommit(
                commit_id=commit_id, seq=seq, timestamp_ms=int(times[commit_id].timestamp() * 1000), columns=columns,
                partition_by=partition_by, added=tuple(added), removed=tuple(removed), expired=commit_id in expired,
            )
        )  # fmt: skip
    return history


def _table_file(entry: tuple, schemas: dict) -> TableFile:
    _, _, _, entry_schema, file_id, kind, path, rows, size, partition_values, segment_id, file_schema, stats = entry
    if kind == DataFile.Kind.DELTA:
        return TableFile(id=str(file_id), path=path, row_count=rows, size_bytes=size, segment_id=str(segment_id))
    schema = schemas.get(entry_schema or file_schema, ())
    return TableFile(id=str(file_id), path=path, row_count=rows, size_bytes=size,
                     partition_values=dict(partition_values or {}), written=schema, stats=stats or {})  # fmt: skip


def expiry_generation(catalog_id) -> int:
    """How many commits retention expired in the catalog: part of the key of a table's served metadata, so a table
    whose history lost snapshots is served anew (rows are never deleted: the count only rises)."""
    return ExpiredCommit.objects.filter(catalog_id=catalog_id).count()
