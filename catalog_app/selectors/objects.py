"""Objects as of a commit: the newest version of each object along the commit's first-parent chain."""

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Exists, F, OuterRef, QuerySet, Subquery, TextField, Window
from django.db.models.functions import Cast, RowNumber

from catalog_app.engine.segments import Column
from catalog_app.models import Commit, ObjectKind, ObjectVersion, Operation, SchemaVersion
from catalog_app.selectors.refs import Chain, sql_slice
from lakeui.errors import NotFoundError

KIND_LABEL = {kind.value: kind.label.lower() for kind in ObjectKind}


@dataclass(frozen=True)
class SchemaRow:
    """A schema version read as plain values (`schema_rows`): a merge of many tables reads thousands, and model
    instances would cost most of its time. Its columns are read as JSON text and decoded when asked for: a merge
    that takes a segment over with a schema version the target has needs only the version's id."""

    id: int
    table_id: uuid.UUID
    columns_json: str
    visible: bool
    commit_id: str

    @cached_property
    def columns(self) -> list[dict]:
        return json.loads(self.columns_json)

    @cached_property
    def read_columns(self) -> tuple[Column, ...]:
        """The columns as the engine reads a segment written with them (a process keeps its schema rows: made once)."""
        return tuple(Column.from_dict(c) for c in self.columns)


def schema_rows(versions: QuerySet) -> Iterable[SchemaRow]:
    """These schema versions (in their order) as `SchemaRow`s."""
    text = versions.annotate(columns_json=Cast("columns", TextField()))
    return (SchemaRow(*row) for row in text.values_list("id", "table_id", "columns_json", "visible", "commit_id"))


def newest_on_chain(rows: QuerySet, chain: Chain, *, key: str, newer_among: QuerySet | None = None) -> QuerySet:
    """Of rows recorded per commit (with line and seq), those that are the newest for their `key` on the chain:
    no row of the same key on the chain is newer (of `newer_among`, when given; else of any of the model's rows).
    Each row costs one probe of the (key, seq) index that stops at the first newer row, so an object with many
    versions costs in proportion to them, not to their square. The probe carries none of `rows`' own filters: with
    a list of 10,000 ids in it, PostgreSQL guessed a few dozen rows and compared every pair instead (7 s, not 70 ms)."""
    among = rows.model.objects.all() if newer_among is None else newer_among
    newer = among.filter(chain.q(), **{key: OuterRef(key), "seq__gt": OuterRef("seq")})
    return rows.filter(chain.q()).filter(~Exists(newer))


def _newest(chain: Chain) -> QuerySet[ObjectVersion]:
    """Versions that are the newest of their object on the chain (dropped ones included)."""
    return newest_on_chain(ObjectVersion.objects.filter(catalog_id=chain.commit.catalog_id), chain, key="object_id")


def objects_newest(chain: Chain, *, object_ids: set[uuid.UUID] | None = None) -> QuerySet[ObjectVersion]:
    """The newest version of every object on the chain (or of these objects), dropped ones included."""
    versions = _newest(chain)
    return versions if object_ids is None else versions.filter(object_id__in=object_ids)


def objects_newest_by_id(chain: Chain, *, object_ids: Iterable[uuid.UUID]) -> QuerySet[ObjectVersion]:
    """The newest version on the chain of each of these objects (dropped ones included), in one query: the objects'
    versions on the chain ranked by a window, newest first, and the first of each kept (the merge's diff reads
    thousands of objects by id this way; `objects_newest`'s probe per version walks the line's index, every
    version of the catalog's line, and a few objects of 10,000 tables took 15-20 ms so)."""
    rows = ObjectVersion.objects.filter(chain.q(), catalog_id=chain.commit.catalog_id, object_id__any=object_ids)
    ranked = rows.annotate(n=Window(RowNumber(), partition_by=F("object_id"), order_by=F("seq").desc()))
    # The window ranks ids alone; the rows, states and all, are read by id after: ranked whole, 10,000 objects'
    # versions sorted past the server's sort memory onto disk.
    return ObjectVersion.objects.filter(id__in=Subquery(ranked.filter(n=1).values("id")))


def objects_newest_rows(
    chain: Chain, *, object_ids: Iterable[uuid.UUID], fields: tuple[str, ...], state_as_text: bool = False
) -> QuerySet:
    """`objects_newest_by_id` as plain rows of `fields`. `state_as_text`: the `state` field as its JSON text, for a
    caller that decodes each distinct state once."""
    newest = objects_newest_by_id(chain, object_ids=object_ids)
    if state_as_text:
        newest = newest.annotate(state_text=Cast("state", TextField()))
        fields = tuple("state_text" if name == "state" else name for name in fields)
    return newest.values_list(*fields)


def object_ids_named(chain: Chain, *, names: Iterable[str], kinds: Iterable[str]) -> QuerySet:
    """The ids of the objects of these kinds that carried one of these names in some version on the chain (their
    newest or not: which objects may hold the names now), as a flat list of values."""
    return ObjectVersion.objects.filter(
        chain.q(), catalog_id=chain.commit.catalog_id, name__any=names, kind__in=list(kinds)
    ).values_list("object_id", flat=True)


def object_children(chain: Chain, *, parent_id: uuid.UUID) -> list[tuple[uuid.UUID, str]]:
    """The live objects of a database on the chain (its tables and views), as (object id, name)."""
    children = ObjectVersion.objects.filter(catalog_id=chain.commit.catalog_id, parent_id=parent_id)
    live = newest_on_chain(children, chain, key="object_id").filter(dropped=False)
    return list(live.values_list("object_id", "name"))


def object_named(chain: Chain, *, kind: str, name: str, parent_id: uuid.UUID | None = None) -> ObjectVersion | None:
    """The newest version on the chain that carried this name (of this kind, in this parent), dropped or not: a
    table as it was named when it was dropped, say."""
    rows = ObjectVersion.objects.filter(catalog_id=chain.commit.catalog_id, kind=kind, name=name, parent_id=parent_id)
    return newest_on_chain(rows, chain, key="object_id", newer_among=rows).order_by("-seq").first()


def objects_at(chain: Chain, *, kind: str, parent_id: uuid.UUID | None = None) -> QuerySet[ObjectVersion]:
    """The live objects of a kind (in one database, for tables and views), by name."""
    versions = _newest(chain).filter(kind=kind, dropped=False)
    if parent_id is not None:
        versions = versions.filter(parent_id=parent_id)
    return versions.select_related("commit").order_by("name")


def object_find(
    chain: Chain, *, kind: str, name: str, parent_id: uuid.UUID | None = None, parent_named: str | None = None
) -> ObjectVersion | None:
    """The live object of a kind named `name` (in the database `parent_id`, or in the live database named
    `parent_named`, found in the same query), with its commit: `objects_at(...).filter(name=name).first()` in plain
    SQL (tests/catalog_app/test_cold_reads.py compares them), as every read of a table runs it and the ORM took
    several times as long to build the query as the database to answer it."""
    live, params = _live_sql("v", chain, kind)
    sql = f"SELECT {_VERSION_AND_COMMIT} FROM {_VERSIONS} v JOIN {_COMMITS} c ON c.id = v.commit_id WHERE {live}"
    sql += " AND v.name = %s"
    params.append(name)
    if parent_id is not None:
        sql += " AND v.parent_id = %s"
        params.append(parent_id)
    elif parent_named is not None:
        parent, more = _live_sql("d", chain, ObjectKind.DATABASE)
        sql += f" AND v.parent_id = (SELECT d.object_id FROM {_VERSIONS} d WHERE {parent} AND d.name = %s LIMIT 1)"
        params += [*more, parent_named]
    found = versions_raw(f"{sql} LIMIT 1", params)
    return found[0] if found else None


@dataclass(frozen=True, slots=True)
class CommitTime:
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ListedObject:
    """A live object as a list answer shows it (the database and table serializers read these attributes of an
    ObjectVersion): plain values, as a page of model instances, each with its commit, cost more than its query."""

    object_id: uuid.UUID
    name: str
    commit_id: str
    parent_id: uuid.UUID | None
    state: dict
    commit: CommitTime


class ObjectsAt:
    """`objects_at` read a page at a time in plain SQL, for a list answer (lakeui/api/pagination.py slices it and
    counts it only when it is longer than its page): the live objects of a kind (in one database), by name, as
    `ListedObject`s. A page is read with the count of the whole list (a window over the rows the page is sorted
    from anyway), so a list longer than its page costs one query, not a COUNT more."""

    def __init__(self, chain: Chain, *, kind: str, parent_id: uuid.UUID | None = None) -> None:
        self.where, self.params = _live_sql("v", chain, kind)
        if parent_id is not None:
            self.where += " AND v.parent_id = %s"
            self.params.append(parent_id)
        self.counted: int | None = None

    def count(self) -> int:
        if self.counted is None:
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT count(*) FROM {_VERSIONS} v WHERE {self.where}", self.params)
                self.counted = cursor.fetchone()[0]
        return self.counted

    def __getitem__(self, key: slice) -> list[ListedObject]:
        sql = (
            f"SELECT v.object_id, v.name, v.commit_id, v.parent_id, v.state, c.created_at, count(*) OVER ()"
            f" FROM {_VERSIONS} v JOIN {_COMMITS} c ON c.id = v.commit_id WHERE {self.where} ORDER BY v.name"
        )
        rows = sql_slice(sql, self.params, key)
        if rows:
            self.counted = rows[0][-1]
        return [
            ListedObject(object_id, name, commit_id, parent_id, json_column(state), CommitTime(created_at))
            for object_id, name, commit_id, parent_id, state, created_at, _ in rows
        ]


_VERSIONS, _COMMITS = ObjectVersion._meta.db_table, Commit._meta.db_table
_VERSION_FIELDS = [f.attname for f in ObjectVersion._meta.concrete_fields]
_COMMIT_FIELDS = [f.attname for f in Commit._meta.concrete_fields]
_VERSION_AND_COMMIT = ", ".join(
    [f"v.{f.column}" for f in ObjectVersion._meta.concrete_fields]
    + [f"c.{f.column}" for f in Commit._meta.concrete_fields]
)
_STATE = _VERSION_FIELDS.index("state")


def chain_sql(alias: str, chain: Chain) -> tuple[str, list]:
    """Chain.q() in plain SQL over the rows `alias`."""
    condition = " OR ".join(f"({alias}.line_id = %s AND {alias}.seq <= %s)" for _ in chain.segments)
    return f"({condition})", [value for segment in chain.segments for value in segment]


def _live_sql(alias: str, chain: Chain, kind: str) -> tuple[str, list]:
    """`objects_at`'s condition in plain SQL (as newest_on_chain writes it: the newest version of its object on
    the chain, probed by (object, seq), not dropped, of the kind) over the versions `alias`, and its parameters."""
    mine, params = chain_sql(alias, chain)
    newer, more = chain_sql(f"{alias}_n", chain)
    sql = (
        f"{alias}.catalog_id = %s AND {mine} AND NOT EXISTS (SELECT 1 FROM {_VERSIONS} {alias}_n WHERE {newer}"
        f" AND {alias}_n.object_id = {alias}.object_id AND {alias}_n.seq > {alias}.seq)"
        f" AND NOT {alias}.dropped AND {alias}.kind = %s"
    )
    return sql, [chain.commit.catalog_id, *params, *more, kind]


def versions_raw(sql: str, params: list) -> list[ObjectVersion]:
    """Object versions with their commits from plain SQL selecting `_VERSION_AND_COMMIT`, as the ORM would make them
    (the state decoded as JSONField decodes it)."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    alias = connection.alias
    return [_version_of(row, alias) for row in rows]


def json_column(value):
    """A JSON column as JSONField decodes it (PostgreSQL's jsonb comes as its text, as Django has psycopg load it)."""
    return json.loads(value) if isinstance(value, str) else value


def _version_of(row: tuple, alias: str) -> ObjectVersion:
    values = list(row[: len(_VERSION_FIELDS)])
    values[_STATE] = json_column(values[_STATE])
    version = ObjectVersion.from_db(alias, _VERSION_FIELDS, values)
    commit = Commit.from_db(alias, _COMMIT_FIELDS, row[len(_VERSION_FIELDS) :])
    ObjectVersion.commit.field.set_cached_value(version, commit)
    return version


def object_get(chain: Chain, *, kind: str, name: str, parent_id: uuid.UUID | None = None) -> ObjectVersion:
    version = object_find(chain, kind=kind, name=name, parent_id=parent_id)
    if version is None:
        raise NotFoundError(f"{kind}_not_found", f"There is no {KIND_LABEL[kind]} {name!r} at this ref.")
    return version


def object_by_id(chain: Chain, *, object_id: uuid.UUID) -> ObjectVersion | None:
    """The newest version of an object on the chain, dropped or not (None if it never existed there): its versions
    on the chain by the (object, seq) index, newest first (of two in one commit, the first made, as ever)."""
    return ObjectVersion.objects.filter(chain.q(), object_id=object_id).order_by("-seq", "id").first()


@dataclass(frozen=True)
class HistoryEntry:
    version: ObjectVersion
    commit: Commit
    operations: list[Operation]
    schema_version: SchemaVersion | None


def object_history(
    chain: Chain, *, object_id: uuid.UUID, schemas: Iterable[SchemaVersion] | None = None
) -> list[HistoryEntry]:
    """Every version of the object on the chain, newest first, with its commit (its author: the username read) and
    operations, in one plain query (the ORM took longer to build its two than the database to answer them);
    `schemas`: the table's schema history on the chain when the caller has it (`schema_history`), else read here."""
    on_chain, params = chain_sql("v", chain)
    operations = (
        f"(SELECT json_agg(json_build_array(o.id, o.position, o.object_kind, o.op, o.details) ORDER BY o.position)"
        f" FROM {Operation._meta.db_table} o WHERE o.commit_id = v.commit_id AND o.object_id = v.object_id)::text"
    )
    sql = (
        f"SELECT {_VERSION_AND_COMMIT}, a.username, {operations} FROM {_VERSIONS} v"
        f" JOIN {_COMMITS} c ON c.id = v.commit_id LEFT JOIN {get_user_model()._meta.db_table} a ON a.id = c.author_id"
        f" WHERE {on_chain} AND v.object_id = %s ORDER BY v.seq DESC"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, object_id])
        rows = cursor.fetchall()
    alias = connection.alias
    versions = [_version_of(row[:-2], alias) for row in rows]
    schema_ids = {version.state.get("schema_version_id") for version in versions} - {None}
    known = {} if schemas is None else {schema.id: schema for schema in schemas}
    missing = schema_ids - set(known)  # none when the caller gave the history: a version's schema is on its chain
    schemas = {**known, **(SchemaVersion.objects.in_bulk(missing) if missing else {})}
    entries = []
    for version, (username, operations) in zip(versions, (row[-2:] for row in rows), strict=True):
        commit = version.commit
        author = None
        if commit.author_id is not None:
            author = get_user_model().from_db(alias, ["id", "username"], [commit.author_id, username])
        Commit.author.field.set_cached_value(commit, author)
        ops = [
            Operation.from_db(alias, _OPERATION_FIELDS, [id_, commit.id, position, object_id, kind, op, details])
            for id_, position, kind, op, details in json.loads(operations or "[]")
        ]
        schema = schemas.get(version.state.get("schema_version_id"))
        entries.append(HistoryEntry(version=version, commit=commit, operations=ops, schema_version=schema))
    return entries


_OPERATION_FIELDS = ["id", "commit_id", "position", "object_id", "object_kind", "op", "details"]


def schema_history_read(chain: Chain, *, table_id: uuid.UUID) -> list[SchemaVersion]:
    """`schema_history` as the API answers it (each version with its commit; not what it was copied from), in
    plain SQL."""
    on_chain, params = chain_sql("s", chain)
    fields = list(SchemaVersion._meta.concrete_fields)
    commit_columns = ", ".join(f"c.{f.column}" for f in Commit._meta.concrete_fields)
    sql = (
        f"SELECT {', '.join(f's.{f.column}' for f in fields)}, {commit_columns}"
        f" FROM {SchemaVersion._meta.db_table} s JOIN {_COMMITS} c ON c.id = s.commit_id"
        f" WHERE {on_chain} AND s.table_id = %s ORDER BY s.seq, s.id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, table_id])
        rows = cursor.fetchall()
    names, alias, found = [f.attname for f in fields], connection.alias, []
    at = names.index("columns")
    for row in rows:
        values = list(row[: len(fields)])
        values[at] = json_column(values[at])
        version = SchemaVersion.from_db(alias, names, values)
        SchemaVersion.commit.field.set_cached_value(version, Commit.from_db(alias, _COMMIT_FIELDS, row[len(fields) :]))
        found.append(version)
    return found


def schema_history(chain: Chain, *, table_id: uuid.UUID) -> QuerySet[SchemaVersion]:
    """The table's schema versions on this chain, oldest first: visible ones and invisible ones (merges)."""
    versions = SchemaVersion.objects.filter(chain.q(), table_id=table_id)
    # copied_from: an invisible version names the merged branch's version it copies (and its commit)
    return versions.select_related("commit", "copied_from").order_by("seq", "id")


def schema_histories(
    chain: Chain, *, table_ids: list[uuid.UUID], commit_ids: list[str] | None = None
) -> dict[uuid.UUID, list[SchemaRow]]:
    """`schema_history` of several tables in one query, as plain values; with `commit_ids`, only the versions
    those commits made."""
    versions = SchemaVersion.objects.filter(chain.q(), table_id__any=table_ids)
    if commit_ids is not None:
        versions = versions.filter(commit_id__any=commit_ids)
    histories: dict[uuid.UUID, list[SchemaRow]] = {}
    for row in schema_rows(versions.order_by("seq", "id")):
        histories.setdefault(row.table_id, []).append(row)
    return histories


def schema_version_ids(chain: Chain, *, table_ids: list[uuid.UUID]) -> dict[uuid.UUID, set[int]]:
    """The ids of the schema versions in each table's history on the chain."""
    ids: dict[uuid.UUID, set[int]] = {}
    for table_id, version_id in SchemaVersion.objects.filter(chain.q(), table_id__any=table_ids).values_list(
        "table_id", "id"
    ):
        ids.setdefault(table_id, set()).add(version_id)
    return ids


def versions_on_line(*, line_id: int, after_seq: int, upto_seq: int, limit: int = 500) -> list[tuple] | None:
    """The (object id, parent id) of every version recorded on a line after `after_seq` up to `upto_seq`: what
    the commits between two heads of a branch changed (one probe of the (line, seq) index). None if there are more
    than `limit`."""
    rows = list(
        ObjectVersion.objects.filter(line_id=line_id, seq__gt=after_seq, seq__lte=upto_seq).values_list(
            "object_id", "parent_id"
        )[: limit + 1]
    )
    return None if len(rows) > limit else rows
