"""What a read by API token needs before its view runs, in one query (catalog_app/middleware.py), and the state
the catalog reads that are not at a ref answer from (their ETag, lakeui/api/conditional.py)."""

import re
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection
from rest_framework.authtoken.models import Token

from catalog_app.models import Branch, Catalog, CatalogRole, Commit, ExpiredCommit, Line, Role, Tag
from catalog_app.selectors.access import _admin_of
from catalog_app.selectors.refs import Chain, ResolvedRef

# What a read reads: the state at a ref (a commit, which never changes), or one of the catalog reads not at a ref.
REF, CATALOGS, CATALOG, BRANCHES, TAGS = "ref", "catalogs", "catalog", "branches", "tags"
BRANCH, TAG = "branch", "tag"  # one branch, one tag (their names are the `ref` of token_read)


@dataclass(frozen=True)
class TokenRead:
    user: AbstractBaseUser  # the token's user, active or not
    catalog: Catalog | None  # None: no such catalog (or none named)
    role: str | None  # the user's role in it (catalog_with_role's rule); None: they may not see it
    state: str | None  # what the answer reads now (catalog_state); at a ref, its commit; None: no such ref
    head: tuple[int, int] | None = None  # at a branch: its head's line and seq (lakeui/api/conditional.carried)
    ref_row: tuple | None = None  # at a ref: what `resolved` makes the ref of (read in the same query)

    def resolved(self, ref: str) -> ResolvedRef | None:
        """The ref as ref_resolve finds it (its commit, its branch, its chain), made from what the query read, for a
        read whose answer is not kept: its view then reads neither the ref nor its chain again. None if the query
        found no ref (a commit id prefix, an expired commit: the normal way answers)."""
        if self.ref_row is None or self.catalog is None:
            return None
        kind, *row = self.ref_row
        commits = len(_fields["commit"])
        commit = Commit.from_db(connection.alias, _fields["commit"], row[:commits])
        branch_id, created_at, created_by_id, forks = row[commits:]
        branch = None
        if kind == "branch":
            values = (branch_id, commit.catalog_id, ref, commit.id, created_at, created_by_id)
            branch = Branch.from_db(connection.alias, _BRANCH_FIELDS, values)
            branch.head = commit
        found = ResolvedRef(catalog=self.catalog, kind=kind, name=ref, commit=commit, branch=branch)
        segments = [(commit.line_id, commit.seq)] + [
            tuple(map(int, f.split(":"))) for f in filter(None, forks.split(","))
        ]
        found.__dict__["chain"] = Chain(commit=commit, segments=tuple(segments))  # its cached_property, filled
        return found


def token_read(*, key: str, kind: str, catalog: str | None = None, ref: str | None = None) -> TokenRead | None:
    """The user of API token `key`, the catalog named `catalog` with their role in it, and the state a read of
    `kind` reads (at a ref: the commit of the branch, tag or full commit id `ref`, as ref_resolve finds it, and for
    a branch its head's line and seq; a commit retention expired is no state: the normal way answers 410), in one
    query (plain SQL, values bound: the ORM would take longer to build it than the database to answer). None if
    there is no such token."""
    sql, params = _query(kind)
    row = _fetch(f"lakeui_token_{kind}", sql, params(ref, catalog, key))
    if row is None:
        return None
    users, catalogs = len(_fields["user"]), len(_fields["catalog"])
    user = get_user_model().from_db(connection.alias, _fields["user"], row[:users])
    found, granted, state = row[users], *row[users + catalogs : users + catalogs + 2]
    ref_row = tuple(row[users + catalogs + 2 :]) if kind == REF and state is not None else None
    head = None
    if kind == REF and state is not None and " " in state:  # a branch: "commit line seq"
        state, line, seq = state.split(" ")
        head = (int(line), int(seq))
    if found is None:
        return TokenRead(user=user, catalog=None, role=None, state=state if kind == CATALOGS else None)
    place = Catalog.from_db(connection.alias, _fields["catalog"], row[users : users + catalogs])
    role = Role.ADMIN if _admin_of(user, place) else granted  # as catalog_with_role (selectors/access.py)
    return TokenRead(user=user, catalog=place, role=role, state=state, head=head, ref_row=ref_row)


def catalog_state(
    *, user: AbstractBaseUser, kind: str, catalog: str | None = None, name: str | None = None
) -> str | None:
    """A name for what a read of `kind` (CATALOGS, CATALOG, BRANCHES, TAGS, BRANCH or TAG `name`) by `user` answers
    from, which changes whenever that answer could: the versions of the rows it reads (PostgreSQL's xmin and ctid,
    new ones for each change, so a state never comes back). For the catalog list: the catalogs the user may see
    (catalogs_visible's rule) and their creators; for a catalog: the columns of its row the answer shows
    (SHOWN_CATALOG_COLUMNS) and its creator; for branches and tags: the catalog's, and their creators; for a branch
    or a tag: its row and its creator. The same expression as token_read's, so the view and the cached-read path
    name an answer alike.
    None where there is no such name (a kind this does not name): the answer is made each time.

    Read before the answer is made: if the rows change in between, the answer is kept under a state that never
    comes back, so it is never served (never stale)."""
    states = _states()
    if kind not in states:
        return None
    users, catalogs = get_user_model()._meta.db_table, Catalog._meta.db_table
    sql = f"SELECT {states[kind]} FROM {users} u LEFT JOIN {catalogs} c ON c.name = %s WHERE u.id = %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, [*([name] if kind in (BRANCH, TAG) else []), catalog, user.pk])
        row = cursor.fetchone()
    return None if row is None else row[0]


def _fetch(name: str, sql: str, params: list) -> tuple | None:
    """The query's one row, as a statement prepared once per connection (LAKEUI_READ_PREPARED): every API read runs
    it, and planning it took several times as long as running it."""
    with connection.cursor() as cursor:
        if not settings.LAKEUI_READ_PREPARED:
            cursor.execute(sql, params)
            return cursor.fetchone()
        raw = connection.connection  # a new connection (a restart, CONN_MAX_AGE) prepares it again
        prepared = raw.__dict__.setdefault("lakeui_prepared", set())
        if name not in prepared:
            numbered = iter(range(1, len(params) + 1))
            raw.execute(f"PREPARE {name} AS {re.sub('%s', lambda _: f'${next(numbered)}', sql)}")  # not logged
            prepared.add(name)
        cursor.execute(f"EXECUTE {name}({', '.join(['%s'] * len(params))})", params)
        return cursor.fetchone()


FULL_COMMIT_ID = re.compile(r"[0-9a-f]{32}")  # as commit_get looks a commit up by its id (names.COMMIT_ID_PREFIX)
_sql: dict[str, str] = {}
_fields: dict[str, list[str]] = {}
_state_sql: dict[str, str] = {}


def _states() -> dict[str, str]:
    """Each kind's state as an SQL expression over the reader `u` and the catalog `c` (NULL if none is named)."""
    if not _state_sql:
        catalogs, roles = Catalog._meta.db_table, CatalogRole._meta.db_table
        shown = _shown_catalog if settings.LAKEUI_READ_CARRY else _versions  # off: as before
        visible = (
            f"u.is_staff OR u.is_superuser OR v.created_by_id = u.id"
            f" OR EXISTS (SELECT 1 FROM {roles} r WHERE r.catalog_id = v.id AND r.user_id = u.id)"
        )
        _state_sql.update(
            {
                CATALOGS: _digest(CATALOGS, catalogs, "v", visible, shown),
                CATALOG: f"CASE WHEN c.id IS NOT NULL THEN '{CATALOG}:' || md5({shown('c')}) END",
                BRANCHES: _digest(BRANCHES, Branch._meta.db_table, "b", "b.catalog_id = c.id"),
                TAGS: _digest(TAGS, Tag._meta.db_table, "g", "g.catalog_id = c.id"),
                BRANCH: _digest(BRANCH, Branch._meta.db_table, "b", "b.catalog_id = c.id AND b.name = %s"),
                TAG: _digest(TAG, Tag._meta.db_table, "g", "g.catalog_id = c.id AND g.name = %s"),
            }
        )
    return _state_sql


def _versions(alias: str) -> str:
    """A row's id and version and its creator's version (the answers show the creator's username), as text. A
    version is the transaction that wrote it (xmin) and where (ctid): a row changed twice in one transaction, which
    another sees only once committed but that transaction itself sees each time, moves each time."""
    users = get_user_model()._meta.db_table
    return (
        f"{alias}.id::text || ':' || {alias}.xmin::text || {alias}.ctid::text || ':' || coalesce("
        f"(SELECT x.xmin::text || x.ctid::text FROM {users} x WHERE x.id = {alias}.created_by_id), '')"
    )


# The catalog columns its answers show (catalogs.CatalogOutputSerializer; the creator by _versions). Not the row's
# version: every commit moves the catalog's last_seq, which no answer shows, and a catalog read would change with it.
SHOWN_CATALOG_COLUMNS = ("name", "description", "default_branch", "created_at")


def _shown_catalog(alias: str) -> str:
    users, columns = get_user_model()._meta.db_table, ", ".join(f"{alias}.{c}" for c in SHOWN_CATALOG_COLUMNS)
    return (
        f"{alias}.id::text || ':' || md5(row({columns})::text) || ':' || coalesce("
        f"(SELECT x.xmin::text || x.ctid::text FROM {users} x WHERE x.id = {alias}.created_by_id), '')"
    )


def _digest(kind: str, table: str, alias: str, where: str, versions=None) -> str:
    rows = f"string_agg({(versions or _versions)(alias)}, ',' ORDER BY {alias}.id)"
    return f"(SELECT '{kind}:' || md5(coalesce({rows}, '')) FROM {table} {alias} WHERE {where})"


def _query(kind: str) -> tuple[str, object]:
    """token_read's query for `kind` and a function of the ref, the catalog and the key giving its parameters."""
    if kind not in _sql:
        users, catalogs = get_user_model()._meta.concrete_fields, Catalog._meta.concrete_fields
        quote = connection.ops.quote_name
        columns = [f"u.{quote(field.column)}" for field in users] + [f"c.{quote(field.column)}" for field in catalogs]
        if kind == REF:
            _sql[kind] = _ref_query(columns)
        else:
            state = _states().get(kind, "NULL")
            _sql[kind] = (
                f"SELECT {', '.join(columns)},"
                f" (SELECT r.role FROM {CatalogRole._meta.db_table} r WHERE r.catalog_id = c.id AND r.user_id = u.id),"
                f" {state}"
                f" FROM {Token._meta.db_table} t JOIN {get_user_model()._meta.db_table} u ON u.id = t.user_id"
                f" LEFT JOIN {Catalog._meta.db_table} c ON c.name = %s WHERE t.key = %s"
            )
        _fields["user"] = [field.attname for field in users]
        _fields["catalog"] = [field.attname for field in catalogs]
        _fields["commit"] = [field.attname for field in Commit._meta.concrete_fields]
    if kind == REF:  # a commit named by its full id only (a prefix may name several: the normal way says so)
        full = settings.LAKEUI_READ_CARRY  # off: a commit id is read the normal way, as before
        commit = lambda ref: ref if full and ref and FULL_COMMIT_ID.fullmatch(ref) else None  # noqa: E731
        return _sql[kind], lambda ref, catalog, key: [catalog, ref, ref, commit(ref), key]
    named = kind in (BRANCH, TAG)
    return _sql[kind], lambda ref, catalog, key: [*([ref] if named else []), catalog, key]


_BRANCH_FIELDS = ["id", "catalog_id", "name", "head_id", "created_at", "created_by_id"]


def _ref_query(columns: list[str]) -> str:
    """token_read's query at a ref: the ref's commit as ref_resolve finds it (a branch's head, else a tag's commit,
    else a commit by its full id that retention did not expire), its state (for a branch "commit line seq"), and
    for a read whose answer is not kept (TokenRead.resolved) the commit's row, the branch's and the chain's forks
    (commit_chain's recursive query, as "line:fork_seq,..." nearest first)."""
    quote = connection.ops.quote_name
    commits, branches, tags = Commit._meta.db_table, Branch._meta.db_table, Tag._meta.db_table
    lines, expired = Line._meta.db_table, ExpiredCommit._meta.db_table
    commit_columns = [quote(field.column) for field in Commit._meta.concrete_fields]
    found = ", ".join(f"m.{c}" for c in commit_columns)
    forks = (
        f"(WITH RECURSIVE up(parent_id, fork_seq, depth) AS ("
        f" SELECT parent_id, fork_seq, 0 FROM {lines} WHERE id = f.line_id"
        f" UNION ALL SELECT l.parent_id, l.fork_seq, up.depth + 1 FROM {lines} l JOIN up ON l.id = up.parent_id)"
        f" SELECT coalesce(string_agg(parent_id || ':' || fork_seq, ',' ORDER BY depth), '') FROM up"
        f" WHERE parent_id IS NOT NULL)"
    )
    return (
        f"SELECT {', '.join(columns)},"
        f" (SELECT r.role FROM {CatalogRole._meta.db_table} r WHERE r.catalog_id = c.id AND r.user_id = u.id),"
        f" CASE f.kind WHEN 'branch' THEN f.id || ' ' || f.line_id || ' ' || f.seq ELSE f.id END,"
        f" f.kind, {', '.join(f'f.{c}' for c in commit_columns)}, f.branch_id, f.branch_created_at,"
        f" f.branch_created_by_id, CASE WHEN f.kind IS NOT NULL THEN {forks} END"
        f" FROM {Token._meta.db_table} t JOIN {get_user_model()._meta.db_table} u ON u.id = t.user_id"
        f" LEFT JOIN {Catalog._meta.db_table} c ON c.name = %s"
        f" LEFT JOIN LATERAL (SELECT * FROM ("
        f" SELECT 1 AS o, 'branch' AS kind, {found}, b.id AS branch_id, b.created_at AS branch_created_at,"
        f" b.created_by_id AS branch_created_by_id"
        f" FROM {branches} b JOIN {commits} m ON m.id = b.head_id WHERE b.catalog_id = c.id AND b.name = %s"
        f" UNION ALL SELECT 2, 'tag', {found}, NULL, NULL, NULL"
        f" FROM {tags} g JOIN {commits} m ON m.id = g.commit_id WHERE g.catalog_id = c.id AND g.name = %s"
        f" UNION ALL SELECT 3, 'commit', {found}, NULL, NULL, NULL FROM {commits} m"
        f" WHERE m.catalog_id = c.id AND m.id = %s AND NOT EXISTS (SELECT 1 FROM {expired} e WHERE e.commit_id = m.id)"
        f") refs ORDER BY o LIMIT 1) f ON true"
        f" WHERE t.key = %s"
    )
