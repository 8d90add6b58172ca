"""Writing commits. A service opens a draft inside its transaction, reads the branch head's state through it,
stages object versions and operations, and commits; nothing is visible until the transaction commits.

The draft locks the catalog row first, so commits of one catalog are serialised and get increasing sequence
numbers and times. A writer that names the head it read (`expected_head`) gets a 409 `branch_moved` if the
branch has moved since; one that does not is applied to the current head.

A writer that reads or writes files (an Iceberg commit, a register) prepares its draft without the lock instead
(`commit_prepare`): it reads the head's state, checks and writes its files, and notes what it read (`watch`). Under
the lock (`draft_lock`) only the database is read: the draft moves onto the branch's head as it is now if nothing it
watched changed there (another table moving on the branch does not count), or the writer prepares it again.
"""

import operator
import uuid
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, connections, models, transaction
from django.db.models import Q
from django.utils import timezone

from catalog_app.models import (
    Branch,
    Catalog,
    Commit,
    DataFile,
    FileEntry,
    Line,
    ObjectVersion,
    Operation,
    ProtectedBranch,
    SchemaVersion,
    Tag,
)
from catalog_app.selectors import objects as object_selectors
from catalog_app.selectors.objects import SchemaRow
from catalog_app.selectors.refs import Chain, ResolvedRef, commit_chain
from catalog_app.selectors.table_files import FileRow
from catalog_app.services.access import branch_write_check
from lakeui.errors import ApplicationError, ConflictError, NotFoundError
from lakeui.fields import JSONField
from lakeui.jobs.models import Job
from lakeui.jobs.registry import ClaimLost, crash_point
from lakeui.jobs.services import job_claim_held
from lakeui.memory import gc_paused

MESSAGE_BRANCH_MOVED = "Branch {branch!r} has moved: its head is {head}, not {expected}. Read it again and retry."
MESSAGE_READ_ONLY_REF = "{ref!r} is a {kind}; only branches can be written to."
COPY_ROWS = 500  # a commit's rows of one model go in with COPY from this many on (PostgreSQL)
# Fields whose values COPY takes as they are (it parses its text by the column's type); others (JSON, times set on
# save) are prepared as Django prepares them for an INSERT.
AS_THEY_ARE = frozenset({
    "AutoField", "BigAutoField", "BigIntegerField", "BooleanField", "CharField", "ForeignKey", "IntegerField",
    "OneToOneField", "PositiveIntegerField", "PositiveSmallIntegerField", "SmallIntegerField", "TextField", "UUIDField",
})  # fmt: skip
VERSION_ATTNAMES = ("id", "catalog_id", "object_id", "kind", "parent_id", "name", "commit_id", "line_id", "seq",
                    "dropped", "state")  # fmt: skip
assert tuple(f.attname for f in ObjectVersion._meta.concrete_fields) == VERSION_ATTNAMES, "CommitDraft.put's order"


@dataclass
class _Staged:
    version: ObjectVersion
    new_schema: list[dict] | None = None


@dataclass
class CommitDraft:
    catalog: Catalog
    branch: Branch | None  # None: a commit no branch points to (a virtual merge base, see commit_begin_detached)
    parent: Commit
    chain: Chain
    _staged: list[_Staged] = field(default_factory=list)
    _operations: list[tuple[uuid.UUID, str, str, dict[str, Any]]] = field(default_factory=list)  # OPERATION_FIELDS
    _new_files: list[DataFile] = field(default_factory=list)
    _file_entries: list[tuple[DataFile | FileRow, bool, SchemaVersion | SchemaRow | None, bool | None]] = field(
        default_factory=list
    )
    _schema_copies: list[SchemaVersion] = field(default_factory=list)
    _watched: "Watched" = field(default_factory=lambda: Watched())

    # --- reading the head's state -------------------------------------------------------------------------
    def find(self, kind: str, name: str, parent_id: uuid.UUID | None = None) -> ObjectVersion | None:
        return object_selectors.object_find(self.chain, kind=kind, name=name, parent_id=parent_id)

    def get(self, kind: str, name: str, parent_id: uuid.UUID | None = None) -> ObjectVersion:
        return object_selectors.object_get(self.chain, kind=kind, name=name, parent_id=parent_id)

    def children(self, kind: str, parent_id: uuid.UUID) -> list[ObjectVersion]:
        return list(object_selectors.objects_at(self.chain, kind=kind, parent_id=parent_id))

    def watch(
        self,
        *,
        objects: Iterable[uuid.UUID] = (),
        files_of: Iterable[uuid.UUID] = (),
        name: tuple[uuid.UUID | None, str] | None = None,
        check: Callable[[], bool] | None = None,
    ) -> None:
        """What a draft prepared without the lock (`commit_prepare`) read, for `draft_lock` to find unchanged: the
        objects whose versions it read, the tables whose files it read, a name it takes (in the parent object
        `name[0]`) and a `check` of the database that must still hold (no file work: it runs under the lock)."""
        self._watched.objects.update(objects)
        self._watched.files_of.update(files_of)
        if name is not None:
            self._watched.names.add(name)
        if check is not None:
            self._watched.checks.append(check)

    # --- staging ------------------------------------------------------------------------------------------
    def put(
        self,
        *,
        kind: str,
        object_id: uuid.UUID,
        name: str,
        state: dict[str, Any],
        parent_id: uuid.UUID | None = None,
        dropped: bool = False,
        new_schema: list[dict] | None = None,
    ) -> ObjectVersion:
        """Stage the object's next version. With `new_schema`, a new visible schema version is recorded and
        `state["schema_version_id"]` is set to it."""
        # Made from its values in field order (the model's fast path, VERSION_ATTNAMES): a merge of 10,000 tables
        # stages as many versions, and keyword arguments cost three times as much.
        catalog_id = self.catalog.id
        version = ObjectVersion(None, catalog_id, object_id, kind, parent_id, name, None, None, None, dropped, state)
        self._staged.append(_Staged(version=version, new_schema=new_schema))
        return version

    def operation(self, *, object_id: uuid.UUID, kind: str, op: str, details: dict[str, Any] | None = None) -> None:
        self._operations.append((object_id, kind, op, details or {}))

    def add_file(
        self,
        file: DataFile | FileRow,
        *,
        new: bool = True,
        schema_version: SchemaVersion | SchemaRow | None = None,
        schema_visible: bool | None = None,
    ) -> None:
        """Make a file live in its table; `new` files (DataFiles) are registered by this commit. A file already
        registered may be read as a `FileRow`. A segment taken over from another branch names the schema version it
        reads with on this one."""
        if new:
            self._new_files.append(file)
        self._file_entries.append((file, False, schema_version, schema_visible))

    def remove_file(self, file: DataFile | FileRow) -> None:
        self._file_entries.append((file, True, None, None))

    def schema_copy(self, source: SchemaVersion | SchemaRow) -> SchemaVersion:
        """Stage an invisible copy of another branch's schema version in this branch's history
        (docs/merge-semantics.md#schema-versions); it is saved with the commit."""
        copy = SchemaVersion(
            catalog=self.catalog, table_id=source.table_id, columns=source.columns, visible=False,
            copied_from_id=source.id,
        )  # fmt: skip
        self._schema_copies.append(copy)
        return copy

    # --- committing ---------------------------------------------------------------------------------------
    @gc_paused()
    def commit(
        self,
        *,
        author: AbstractBaseUser | None,
        message: str,
        merge_parent: Commit | None = None,
        job: Job | None = None,
        also: Callable[[Commit], models.Model] | None = None,
    ) -> Commit:
        """Write the commit and what it staged, and move the branch to it. `also`: a row of another model that records
        the commit (a merge's audit log), made from it without the database while the database stores the commit's
        rows (`rows_in_turn`), and written in the same transaction."""
        if not (self._staged or self._operations or self._file_entries or merge_parent):
            raise ApplicationError("empty_commit", "Nothing to commit: the change leaves every object as it was.")
        commit = _commit_insert(
            catalog=self.catalog, branch=self.branch, parent=self.parent, author=author, message=message,
            merge_parent=merge_parent, job=job,
        )  # fmt: skip
        for staged in self._staged:
            if staged.new_schema is not None:
                schema = SchemaVersion.objects.create(
                    catalog=self.catalog, table_id=staged.version.object_id, columns=staged.new_schema,
                    commit=commit, line_id=commit.line_id, seq=commit.seq,
                )  # fmt: skip
                staged.version.state = {**staged.version.state, "schema_version_id": schema.id}
            _recorded_by(staged.version, commit)
        for copy in self._schema_copies:
            copy.commit, copy.line_id, copy.seq = commit, commit.line_id, commit.seq
            copy.save()
        versions = [staged.version for staged in self._staged]
        schema_of = {version.object_id: version.state.get("schema_version_id") for version in versions}
        for file in self._new_files:  # a segment written for this commit reads with the schema its table gets here
            if file.kind == DataFile.Kind.SEGMENT and file.schema_version_id is None:
                file.schema_version_id = schema_of[file.table_id]
        rows_number(ObjectVersion, versions)
        operations = [(commit.id, position, *operation) for position, operation in enumerate(self._operations)]
        entries = [
            (self.catalog.id, file.table_id, file.id, commit.id, commit.line_id, commit.seq, removed,
             None if schema_version is None else schema_version.id, schema_visible)
            for file, removed, schema_version, schema_visible in self._file_entries
        ]  # fmt: skip
        move = None if self.branch is None else BranchMove(self.branch.id, self.parent.id, commit.id)
        moved = rows_in_turn([
            lambda: instance_rows(ObjectVersion, versions),
            lambda: value_rows(Operation, OPERATION_FIELDS, operations),
            lambda: instance_rows(DataFile, self._new_files),
            lambda: value_rows(FileEntry, FILE_ENTRY_FIELDS, entries),
            *([lambda: _one_row(also(commit))] if also else []),
        ], move=move)  # fmt: skip
        if self.branch is None:
            return commit
        if not moved:  # unreachable while the catalog lock is held; kept as the last line of defence
            raise ConflictError("branch_moved", f"Branch {self.branch.name!r} moved during the commit.")
        self.branch.head = commit
        return commit


@dataclass
class Watched:
    """What a draft prepared without the lock read (`CommitDraft.watch`)."""

    objects: set[uuid.UUID] = field(default_factory=set)
    files_of: set[uuid.UUID] = field(default_factory=set)
    names: set[tuple[uuid.UUID | None, str]] = field(default_factory=set)
    checks: list[Callable[[], bool]] = field(default_factory=list)

    def moved(self, differ: Q) -> bool:
        """Whether a commit between the two states (`differ`: `Chain.difference`) wrote a version of a watched
        object or of an object now named as a watched name, or a file entry of a watched table."""
        versions = Q(object_id__in=self.objects) if self.objects else Q(pk__in=[])
        for parent_id, name in self.names:
            versions |= Q(parent_id=parent_id, name=name)
        if ObjectVersion.objects.filter(differ).filter(versions).exists():
            return True
        return bool(self.files_of) and FileEntry.objects.filter(differ, table_id__in=self.files_of).exists()


@dataclass(frozen=True)
class NewRows:
    """New rows of one model made ready for the database (`instance_rows`, `value_rows`): the values of `columns`
    COPY takes, or, for a few rows, the model instances (`instances`), inserted with others in one statement
    (`rows_in_turn`)."""

    model: type[models.Model]
    columns: list[str] = field(default_factory=list)
    values: list[list] = field(default_factory=list)
    instances: list[models.Model] | None = None

    def insert(self, copying: ExitStack) -> None:
        """Send the rows by COPY, left open in `copying`: closing it waits for the database to store them."""
        db = connections[connection.alias]
        quote = db.ops.quote_name
        statement = f"COPY {quote(self.model._meta.db_table)} ({', '.join(quote(c) for c in self.columns)}) FROM STDIN"
        cursor = copying.enter_context(db.cursor())
        copying.enter_context(db.wrap_database_errors)
        copy = copying.enter_context(cursor.cursor.copy(statement))
        for row in self.values:
            copy.write_row(row)


@dataclass(frozen=True)
class BranchMove:
    """A branch moved from one head to the next, if it is still at the first (a compare-and-swap)."""

    branch_id: int
    head: str
    to: str


def rows_in_turn(batches: Iterable[Callable[[], NewRows]], *, move: BranchMove | None = None) -> bool:
    """Insert batches of new rows, then `move` a branch; True when it moved (or there is no move). Large batches go
    in by COPY one after the other, each made (`batches` called) while the database still stores the COPY before it.
    A COPY's rows are stored for some time after the client sent the last of them (their index entries made, their
    JSON parsed: 0.3-0.5 s of a merge of 10,000 tables), in which the client would only wait. A batch is made without
    the database: its connection is in the COPY until the batch is made. A commit's many rows as one INSERT have
    their values quoted into the statement and parsed again, which costs several times a COPY. The small batches (a
    commit of a few files) and the move go in last, together in one statement (`_together`): one round trip where
    an INSERT of each would wait for the database four or five times under the commit lock."""
    small = []
    with ExitStack() as copying:
        for make in batches:
            rows = make()
            if rows.instances is None:
                copying.close()  # the COPY before ends: its rows are stored
                rows.insert(copying)
            elif rows.instances:
                small.append(rows)
    return _together(small, move)


def _together(batches: list[NewRows], move: BranchMove | None) -> bool:
    """The rows of `batches` (model instances) inserted and `move` made in one statement: each INSERT a
    data-modifying WITH query (foreign keys are checked when the transaction commits), the keys the database numbers
    set on the instances in their order. True when the branch moved."""
    if not batches and move is None:
        return True
    db = connections[connection.alias]
    quote = db.ops.quote_name
    queries, params, numbered = [], [], []
    for index, batch in enumerate(batches):
        meta = batch.model._meta
        auto = meta.pk in meta.db_returning_fields and all(row.pk is None for row in batch.instances)
        fields = [f for f in meta.concrete_fields if not (auto and f.primary_key)]
        for row in batch.instances:
            params += [f.get_db_prep_save(f.pre_save(row, True), db) for f in fields]
            row._state.adding, row._state.db = False, db.alias
        values = ", ".join(["(" + ", ".join(["%s"] * len(fields)) + ")"] * len(batch.instances))
        returning = f" RETURNING {quote(meta.pk.column)}" if auto else ""
        columns = ", ".join(quote(f.column) for f in fields)
        queries.append(f"b{index} AS (INSERT INTO {quote(meta.db_table)} ({columns}) VALUES {values}{returning})")
        if auto:
            numbered.append((index, batch))
    results = [f"ARRAY(SELECT {quote(batch.model._meta.pk.column)} FROM b{index})" for index, batch in numbered]
    if move is not None:
        queries.append(f"moved AS (UPDATE {quote(Branch._meta.db_table)} SET head_id = %s WHERE id = %s"
                       " AND head_id = %s RETURNING 1)")  # fmt: skip
        params += [move.to, move.branch_id, move.head]
        results.append("(SELECT count(*) FROM moved)")
    with db.cursor() as cursor:
        cursor.execute(f"WITH {', '.join(queries)} SELECT {', '.join(results) or '1'}", params)
        found = cursor.fetchone()
    for (_, batch), ids in zip(numbered, found, strict=False):
        for row, pk in zip(batch.instances, ids, strict=True):
            row.pk = pk
    return move is None or found[-1] == 1


def rows_insert(model: type[models.Model], rows: list[models.Model], *, copy_from: int = COPY_ROWS) -> None:
    """Insert new rows of one model as `bulk_create` does, ids included (the caller keeps the instances)."""
    rows_number(model, rows, copy_from=copy_from)
    rows_in_turn([lambda: instance_rows(model, rows, copy_from=copy_from)])


def _copied(rows: list, copy_from: int) -> bool:
    """Whether rows go in by COPY: from `copy_from` rows on."""
    return len(rows) >= copy_from


def rows_number(model: type[models.Model], rows: list[models.Model], *, copy_from: int = COPY_ROWS) -> None:
    """The ids of an auto-numbered key, drawn from its sequence for rows that go in by COPY (`bulk_create` has the
    database number them)."""
    unnumbered = [row for row in rows if row.pk is None]
    if not unnumbered or not _copied(rows, copy_from):
        return
    meta = model._meta
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
            [meta.db_table, meta.pk.column, len(unnumbered)],
        )
        for row, (pk,) in zip(unnumbered, cursor.fetchall(), strict=True):
            row.pk = pk


def instance_rows(model: type[models.Model], rows: list[models.Model], *, copy_from: int = COPY_ROWS) -> NewRows:
    """Model instances as `NewRows`, with their keys (`rows_number` first, where the database numbers them)."""
    if not _copied(rows, copy_from):
        return NewRows(model, instances=rows)
    db = connections[connection.alias]  # the connection itself: `connection` looks it up on every use
    fields = list(model._meta.concrete_fields)
    as_they_are = operator.attrgetter(*(f.attname for f in fields))  # every value in one call; then the others
    as_text = [(i, _json_text(f, db)) for i, f in enumerate(fields) if isinstance(f, models.JSONField)]
    prepared = [(i, f) for i, f in enumerate(fields) if f.get_internal_type() not in AS_THEY_ARE and
                not isinstance(f, models.JSONField)]  # fmt: skip

    def values(row: models.Model) -> list:
        found = list(as_they_are(row))
        for i, text in as_text:
            found[i] = text(found[i])
        for i, f in prepared:
            found[i] = f.get_db_prep_save(f.pre_save(row, True), db)
        return found

    made = [values(row) for row in rows]
    for row in rows:
        row._state.adding, row._state.db = False, db.alias
    return NewRows(model, [f.column for f in fields], made)


def _one_row(row: models.Model) -> NewRows:
    """One row as `NewRows` (by COPY on PostgreSQL: a merge's audit log is megabytes of JSON, which an INSERT would
    send quoted into its text for the server to parse again)."""
    return instance_rows(type(row), [row], copy_from=1)


def value_rows(model: type[models.Model], fields: tuple[str, ...], rows: list[tuple]) -> NewRows:
    """Rows of one model given as plain values of `fields` (attribute names; JSON as Python values) as `NewRows`,
    their auto-numbered ids drawn by the database: rows nobody reads back from the commit (operations, file
    entries). A merge of 10,000 tables writes 20,000 of them; as model instances, making them cost about what their
    COPY costs."""
    if not _copied(rows, COPY_ROWS):
        return NewRows(model, instances=[model(**dict(zip(fields, row, strict=True))) for row in rows])
    by_attname = {f.attname: f for f in model._meta.concrete_fields}
    targets = [by_attname[name] for name in fields]
    db = connections[connection.alias]
    as_text = {i: _json_text(f, db) for i, f in enumerate(targets) if isinstance(f, models.JSONField)}
    made = [[as_text[i](v) if i in as_text else v for i, v in enumerate(row)] for row in rows] if as_text else rows
    return NewRows(model, [f.column for f in targets], made)


def _recorded_by(version: ObjectVersion, commit: Commit) -> None:
    """A staged version recorded by `commit`: its keys set as values (the relations' setters check each instance
    they are given, and a merge of 10,000 tables stages as many versions), the commit and its line kept as read."""
    version.commit_id, version.line_id, version.seq = commit.id, commit.line_id, commit.seq
    _VERSION_COMMIT.set_cached_value(version, commit)
    if _COMMIT_LINE.is_cached(commit):
        _VERSION_LINE.set_cached_value(version, commit.line)


_VERSION_COMMIT, _VERSION_LINE = ObjectVersion._meta.get_field("commit"), ObjectVersion._meta.get_field("line")
_COMMIT_LINE = Commit._meta.get_field("line")
OPERATION_FIELDS = ("commit_id", "position", "object_id", "object_kind", "op", "details")
FILE_ENTRY_FIELDS = ("catalog_id", "table_id", "file_id", "commit_id", "line_id", "seq", "removed",
                     "schema_version_id", "schema_visible")  # fmt: skip


def _json_text(field: models.JSONField, db) -> Callable[[Any], Any]:
    """How a JSON field's values go into COPY: as text (`JSONField.db_text`), or as Django prepares them."""
    if isinstance(field, JSONField):
        return field.db_text
    return lambda value: field.get_db_prep_save(value, db)


@dataclass(frozen=True)
class WriteTarget:
    """Where and as whom a write commits: the branch, the author, the head the writer read (optional; when
    given, a moved branch is a 409) and the commit message (a service supplies one when empty)."""

    catalog: Catalog
    branch: str
    author: AbstractBaseUser | None = None
    expected_head: str | None = None
    message: str = ""
    read: ResolvedRef | None = None  # the branch as the request resolved it: a first prepare starts there

    def begin(self) -> "CommitDraft":
        return commit_begin(catalog=self.catalog, branch=self.branch, expected_head=self.expected_head)

    def prepare(self, *, again: bool = False) -> "CommitDraft":
        """A draft prepared without the lock (`commit_prepare`); `lock` takes the lock for it. `again`: after a try
        whose state moved, from the branch as it is now."""
        read = None if again else self.read
        return commit_prepare(catalog=self.catalog, branch=self.branch, expected_head=self.expected_head, read=read)

    def lock(self, draft: "CommitDraft") -> bool:
        return draft_lock(draft, expected_head=self.expected_head)

    def finish(self, draft: "CommitDraft", default_message: str) -> Commit:
        return draft.commit(author=self.author, message=self.message or default_message)


_CATALOG, _BRANCH, _COMMIT = ([f.attname for f in model._meta.concrete_fields] for model in (Catalog, Branch, Commit))
_CATALOG_LOCK = "SELECT {} FROM {} WHERE id = %s FOR {{}}".format(
    ", ".join(f.column for f in Catalog._meta.concrete_fields), Catalog._meta.db_table
)
_BRANCH_WITH_HEAD = (
    "SELECT {}, {}, ARRAY(SELECT p.pattern FROM {} p WHERE p.catalog_id = %s ORDER BY p.pattern) FROM (SELECT 1) one"
    " LEFT JOIN {} b ON b.catalog_id = %s AND b.name = %s LEFT JOIN {} h ON h.id = b.head_id"
).format(
    *(", ".join(f"{alias}.{f.column}" for f in model._meta.concrete_fields) for alias, model in (("b", Branch),
                                                                                               ("h", Commit))),
    ProtectedBranch._meta.db_table, Branch._meta.db_table, Commit._meta.db_table,
)  # fmt: skip


def catalog_lock(*, catalog: Catalog, exclusive: bool = False) -> Catalog:
    """The catalog's row, locked until the caller's transaction ends: the lock every commit of the catalog takes
    (commits are numbered one after another, `_next_seq`), also taken by writes that must not interleave with them
    (numbering merge requests). It is PostgreSQL's FOR NO KEY UPDATE, so a branch or tag create, which holds the row
    only against retention (`catalog_refs_hold`), never waits for a commit. `exclusive` (FOR UPDATE): retention's
    expiry, which nothing that moves or adds a ref may interleave with."""
    with connection.cursor() as cursor:
        cursor.execute(_CATALOG_LOCK.format("UPDATE" if exclusive else "NO KEY UPDATE"), [catalog.id])
        row = cursor.fetchone()
    if row is None:
        raise Catalog.DoesNotExist(f"There is no catalog {catalog.id}.")
    return Catalog.from_db(connection.alias, _CATALOG, row)


def catalog_lock_with_branch(catalog: Catalog, name: str) -> tuple[Catalog, Branch | None, list[str]]:
    """`catalog_lock` (a commit's), then the branch `name` with its head (None if there is none) and the patterns of
    the catalog's protection rules in one statement: what a commit reads under the lock. Read after the lock is
    taken, in a statement of its own, so that they are as the commit before left them (a statement that waits for a
    row lock sees the other tables as they were when it began)."""
    locked = catalog_lock(catalog=catalog)
    with connection.cursor() as cursor:
        cursor.execute(_BRANCH_WITH_HEAD, [locked.id, locked.id, name])
        row = cursor.fetchone()
    patterns, alias = row[-1], connection.alias
    if row[0] is None:
        return locked, None, patterns
    branch = Branch.from_db(alias, _BRANCH, row[: len(_BRANCH)])
    branch.head = Commit.from_db(alias, _COMMIT, row[len(_BRANCH) : -1])
    branch.catalog = locked
    return locked, branch, patterns


def catalog_refs_hold(*, catalog: Catalog, name: str) -> None:
    """What a branch or tag create holds until its transaction ends: the catalog's row against retention's expiry
    (FOR KEY SHARE: a commit's lock does not conflict with it, so a create never waits for commits), and the ref
    name against another create of that name, a branch's or a tag's (a transaction-scoped advisory lock)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT pg_advisory_xact_lock(hashtextextended(%s, 0)) FROM {Catalog._meta.db_table} WHERE id = %s"
            " FOR KEY SHARE",
            [f"ref:{catalog.id}:{name}", catalog.id],
        )


def commit_begin(
    *, catalog: Catalog, branch: str, expected_head: str | None = None, via_merge_request: int | None = None
) -> CommitDraft:
    """Open a draft on a branch. Must run inside `transaction.atomic()`: the catalog lock lasts until it ends.

    Every commit passes here, so this is where protected branches refuse direct writes (403 `branch_protected`);
    only the merge of an approved merge request names itself with `via_merge_request`."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("commit_begin must be called inside transaction.atomic()")
    catalog, target, patterns = catalog_lock_with_branch(catalog, branch)
    if target is None:
        _refuse_non_branch(catalog=catalog, ref=branch)
    branch_write_check(catalog=catalog, branch=branch, via_merge_request=via_merge_request, patterns=patterns)
    _expected_check(target, expected_head)
    return CommitDraft(catalog=catalog, branch=target, parent=target.head, chain=commit_chain(target.head))


def commit_prepare(
    *, catalog: Catalog, branch: str, expected_head: str | None = None, read: ResolvedRef | None = None
) -> CommitDraft:
    """Open a draft on the branch's head as it is now (or as `read`, the branch as the request resolved it, with its
    chain), without the catalog lock: the writer reads that state, checks and writes its files, notes what it read
    (`CommitDraft.watch`), then takes the lock with `draft_lock` and commits. The refusals are `commit_begin`'s;
    a protected branch's is `draft_lock`'s, which checks under the lock anyway."""
    if read is not None and read.branch is not None and read.branch.name == branch:
        _expected_check(read.branch, expected_head)
        return CommitDraft(catalog=catalog, branch=read.branch, parent=read.commit, chain=read.chain)
    target = Branch.objects.select_related("head").filter(catalog=catalog, name=branch).first()
    if target is None:
        _refuse_non_branch(catalog=catalog, ref=branch)
    _expected_check(target, expected_head)
    return CommitDraft(catalog=catalog, branch=target, parent=target.head, chain=commit_chain(target.head))


def draft_lock(draft: CommitDraft, *, expected_head: str | None = None) -> bool:
    """Take the catalog lock for a draft made by `commit_prepare` (inside `transaction.atomic()`, like
    `commit_begin`) and move it onto the branch's head as it is now: True when nothing the draft watched changed
    since the state it was prepared on (a compare-and-swap: another table moving on the branch does not count), so
    it commits as it is; False when the writer must prepare it again. Reads the database only: the lock's holder
    does no file work. The branch's refusals are checked again (a protection set meanwhile, a head expected)."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("draft_lock must be called inside transaction.atomic()")
    catalog, target, patterns = catalog_lock_with_branch(draft.catalog, draft.branch.name)
    if target is None:
        _refuse_non_branch(catalog=catalog, ref=draft.branch.name)
    branch_write_check(catalog=catalog, branch=target.name, patterns=patterns)
    _expected_check(target, expected_head)
    if target.id != draft.branch.id:  # the branch was deleted and made again meanwhile
        return False
    if target.head_id != draft.parent.id:
        chain = commit_chain(target.head)
        differ = draft.chain.difference(chain)
        if differ is not None and draft._watched.moved(differ):
            return False
        draft.parent, draft.chain = target.head, chain
    if not all(check() for check in draft._watched.checks):
        return False
    draft.catalog, draft.branch = catalog, target
    return True


def _expected_check(target: Branch, expected_head: str | None) -> None:
    if expected_head is not None and not target.head_id.startswith(expected_head):
        raise ConflictError(
            "branch_moved",
            MESSAGE_BRANCH_MOVED.format(branch=target.name, head=target.head_id, expected=expected_head),
            details={"head": target.head_id},
        )


def commit_begin_detached(*, catalog: Catalog, parent: Commit) -> CommitDraft:
    """Open a draft after `parent` that no branch will point to: a commit that is read like any other (by its id)
    but moves no ref, such as the virtual base of a criss-cross merge (docs/merge-semantics.md, "Several merge
    bases"). Must run inside `transaction.atomic()`, like `commit_begin`."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("commit_begin_detached must be called inside transaction.atomic()")
    catalog = catalog_lock(catalog=catalog)
    return CommitDraft(catalog=catalog, branch=None, parent=parent, chain=commit_chain(parent))


def commit_publish(*, catalog: Catalog, branch: str, commit: Commit, job: Job | None = None,
                   via_merge_request: int | None = None) -> bool:  # fmt: skip
    """Move `branch` to `commit`, a detached commit made after the branch's head (`commit_begin_detached`): the
    write-audit-publish of a checked merge, whose result was judged before any branch pointed to it. False (nothing
    changed) when the branch has moved from the commit's parent meanwhile. Must run inside `transaction.atomic()`;
    the commit becomes `job`'s, fenced by its claim as `_commit_insert` fences a commit."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("commit_publish must be called inside transaction.atomic()")
    catalog, target, patterns = catalog_lock_with_branch(catalog, branch)
    if target is None:
        _refuse_non_branch(catalog=catalog, ref=branch)
    branch_write_check(catalog=catalog, branch=branch, via_merge_request=via_merge_request, patterns=patterns)
    if target.head_id != commit.parent_id:
        return False
    if job is not None:
        crash_point("before_commit", job_id=str(job.id), attempts=job.attempts)
        if not job_claim_held(job=job):
            raise ClaimLost()
        Commit.objects.filter(id=commit.id).update(job=job)
    _line_join(target=target, commit=commit)
    Branch.objects.filter(id=target.id, head_id=commit.parent_id).update(head=commit)
    return True


def _line_join(*, target: Branch, commit: Commit) -> None:
    """The published commit continues the branch's line, as a commit made on the branch would: its rows move from
    the line made for it alone onto the branch's, which then ends at it (a line per published merge would make
    every read of the branch walk one more line). If the branch's line does not end at the commit's parent, or
    something was forked from the commit meanwhile, its own line becomes the branch's instead."""
    own = Line.objects.get(id=commit.line_id)
    branch_line = Line.objects.select_for_update().get(id=commit.parent.line_id)
    joins = (
        own.branch_id is None and own.tip_seq == commit.seq and branch_line.branch_id == target.id
        and branch_line.tip_seq == commit.parent.seq and not Line.objects.filter(parent=own).exists()
    )  # fmt: skip
    if not joins:
        Line.objects.filter(id=own.id, branch__isnull=True, tip_seq=commit.seq).update(branch=target)
        return
    for model in (Commit, ObjectVersion, SchemaVersion, FileEntry):
        model.objects.filter(line_id=own.id).update(line_id=branch_line.id)
    Line.objects.filter(id=branch_line.id).update(tip_seq=commit.seq)
    own.delete()
    commit.line_id = branch_line.id


def _refuse_non_branch(*, catalog: Catalog, ref: str) -> None:
    if Tag.objects.filter(catalog=catalog, name=ref).exists():
        raise ApplicationError("read_only_ref", MESSAGE_READ_ONLY_REF.format(ref=ref, kind="tag"))
    if Commit.objects.filter(catalog=catalog, id__startswith=ref).exists() and len(ref) >= 8:
        raise ApplicationError("read_only_ref", MESSAGE_READ_ONLY_REF.format(ref=ref, kind="commit"))
    raise NotFoundError("branch_not_found", f"There is no branch {ref!r} in catalog {catalog.name!r}.")


def _next_seq(catalog: Catalog) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {Catalog._meta.db_table} SET last_seq = last_seq + 1 WHERE id = %s RETURNING last_seq",
                       [catalog.id])  # fmt: skip
        return cursor.fetchone()[0]


def _commit_insert(
    *,
    catalog: Catalog,
    branch: Branch | None,
    parent: Commit | None,
    author: AbstractBaseUser | None,
    message: str,
    merge_parent: Commit | None = None,
    job: Job | None = None,
) -> Commit:
    """Insert a commit after `parent` (None for a catalog's first), on the line the branch may extend. A job's
    commit is fenced by its claim: a delivery whose claim another took over (its heartbeat went stale while it
    was merely slow) never commits; the job row stays locked until the commit is in, so no recovery takes it
    meanwhile."""
    if job is not None:
        crash_point("before_commit", job_id=str(job.id), attempts=job.attempts)
        if not job_claim_held(job=job):
            raise ClaimLost()
    seq = _next_seq(catalog)
    created_at = timezone.now() if parent is None else max(timezone.now(), parent.created_at)
    # the branch's own line goes on if it ends at the parent; else the commit starts a line forked at its parent
    extends = (
        parent is not None
        and branch is not None
        and Line.objects.filter(id=parent.line_id, tip_seq=parent.seq, branch_id=branch.id).update(tip_seq=seq)
    )
    if extends:
        line_id = parent.line_id
    else:
        line_id = Line.objects.create(
            catalog=catalog, parent_id=parent.line_id if parent else None, fork_seq=parent.seq if parent else None,
            tip_seq=seq, branch=branch,
        ).id  # fmt: skip
    return Commit.objects.create(
        catalog=catalog, seq=seq, line_id=line_id, parent=parent, merge_parent=merge_parent, created_at=created_at,
        author=author if author is not None and author.is_authenticated else None, message=message, job=job,
    )  # fmt: skip


def catalog_initial_commit(*, catalog: Catalog, author: AbstractBaseUser | None) -> Commit:
    """The root commit of a new catalog; its line is handed to the default branch once that exists."""
    return _commit_insert(catalog=catalog, branch=None, parent=None, author=author, message="Create catalog")
