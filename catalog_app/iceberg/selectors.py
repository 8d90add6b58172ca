"""What the Iceberg REST catalog reads: a ref's databases (namespaces) and tables, and a table's commits on the
ref as the plain values the engine writes Iceberg metadata from (engine/iceberg_metadata.py)."""

import uuid

from django.db import connection
from django.db.models import QuerySet

from catalog_app.engine.iceberg_metadata import TableCommit, TableFile
from catalog_app.engine.segments import Column
from catalog_app.models import (
    Catalog,
    Commit,
    DataFile,
    ExpiredCommit,
    FileEntry,
    ObjectKind,
    ObjectVersion,
)
from catalog_app.selectors.objects import chain_sql, json_column, object_find, objects_at
from catalog_app.selectors.refs import Chain, ResolvedRef, ref_resolve
from catalog_app.selectors.table_files import schema_rows_kept
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


def namespace_table_find(chain: Chain, *, database: ObjectVersion, name: str) -> ObjectVersion | None:
    return object_find(chain, kind=ObjectKind.TABLE, name=name, parent_id=database.object_id)


def namespace_table_get(chain: Chain, *, database: ObjectVersion, name: str) -> ObjectVersion:
    table = namespace_table_find(chain, database=database, name=name)
    if table is None:
        raise NotFoundError("table_not_found", f"Table does not exist: {database.name}.{name}")
    return table


def table_key(chain: Chain, *, table_id: uuid.UUID, changed: bool = False) -> tuple[int, str, int]:
    """The key of the table's Iceberg metadata at the chain, in one query: the sequence number and id of the table's
    newest commit on the chain (a version of it or a file change; `changed`: the chain's own commit, as a commit
    that changed the table knows) and how many commits retention expired in the catalog (a table whose history lost
    snapshots is served anew; rows are never deleted: the count only rises)."""
    expired_sql = f"(SELECT count(*) FROM {_EXPIRED} x WHERE x.catalog_id = %s)"
    if changed:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {expired_sql}", [chain.commit.catalog_id])
            return chain.commit.seq, chain.commit.id, cursor.fetchone()[0]
    versions, params = chain_sql("v", chain)
    files, more = chain_sql("f", chain)
    sql = (
        f"SELECT h.seq, h.commit_id, {expired_sql} FROM ("
        f"(SELECT v.seq, v.commit_id FROM {_VERSIONS} v WHERE {versions} AND v.object_id = %s ORDER BY v.seq DESC"
        f" LIMIT 1) UNION ALL (SELECT f.seq, f.commit_id FROM {_ENTRIES} f WHERE {files} AND f.table_id = %s"
        f" ORDER BY f.seq DESC LIMIT 1)) h ORDER BY h.seq DESC LIMIT 1"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [chain.commit.catalog_id, *params, table_id, *more, table_id])
        return cursor.fetchone()


def _columns(columns: list[dict]) -> tuple[Column, ...]:
    return tuple(Column.from_dict(c) for c in columns)


def table_commits(chain: Chain, *, table_id: uuid.UUID) -> list[TableCommit]:
    """Every commit of the table on the chain, oldest first, with the table's state after it and the files it
    added and removed: three queries in plain SQL whatever the history's length (a commit's answer writes the new
    state's metadata from them), rows read as values, the schemas a process has read kept (they never change)."""
    versions_on, params = chain_sql("v", chain)
    entries_on, more = chain_sql("e", chain)
    made = f"c.created_at, EXISTS (SELECT 1 FROM {_EXPIRED} x WHERE x.commit_id = c.id)"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT v.seq, v.commit_id, v.dropped, v.state, {made} FROM {_VERSIONS} v JOIN {_COMMITS} c"
            f" ON c.id = v.commit_id WHERE {versions_on} AND v.object_id = %s ORDER BY v.seq",
            [*params, table_id],
        )
        versions = [(seq, commit, dropped, json_column(state), at, gone) for seq, commit, dropped, state, at, gone
                    in cursor.fetchall()]  # fmt: skip
        cursor.execute(
            f"SELECT e.seq, e.commit_id, e.removed, e.schema_version_id, e.file_id, f.kind, f.path, f.row_count,"
            f" f.size_bytes, f.partition_values, f.segment_id, f.schema_version_id, f.stats, {made}"
            f" FROM {_ENTRIES} e JOIN {_FILES} f ON f.id = e.file_id JOIN {_COMMITS} c ON c.id = e.commit_id"
            f" WHERE {entries_on} AND e.table_id = %s ORDER BY e.seq, e.id",
            [*more, table_id],
        )
        entries = cursor.fetchall()
    schemas = {i: row.read_columns for i, row in schema_rows_kept({e[3] or e[11] for e in entries} - {None}).items()}
    made_at = {v[1]: (v[4], v[5]) for v in versions} | {e[1]: (e[13], e[14]) for e in entries}
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
        created_at, expired = made_at[commit_id]
        history.append(
            TableCommit(
                commit_id=commit_id, seq=seq, timestamp_ms=int(created_at.timestamp() * 1000), columns=columns,
                partition_by=partition_by, added=tuple(added), removed=tuple(removed), expired=expired,
            )
        )  # fmt: skip
    return history


def _table_file(entry: tuple, schemas: dict) -> TableFile:
    _, _, _, entry_schema, file_id, kind, path, rows, size, partition_values, segment_id, file_schema, stats, *_ = entry
    partition_values, stats = json_column(partition_values), json_column(stats)
    if kind == DataFile.Kind.DELTA:
        return TableFile(id=str(file_id), path=path, row_count=rows, size_bytes=size, segment_id=str(segment_id))
    schema = schemas.get(entry_schema or file_schema, ())
    return TableFile(id=str(file_id), path=path, row_count=rows, size_bytes=size,
                     partition_values=dict(partition_values or {}), written=schema, stats=stats or {})  # fmt: skip


_VERSIONS, _ENTRIES, _FILES = ObjectVersion._meta.db_table, FileEntry._meta.db_table, DataFile._meta.db_table
_COMMITS, _EXPIRED = Commit._meta.db_table, ExpiredCommit._meta.db_table
