"""Reading refs and history: which commit a ref names, its first-parent chain, the log, time travel."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Max, Q, QuerySet
from django.utils.dateparse import parse_datetime
from django.utils.timezone import is_naive, make_aware

from catalog_app.models import Branch, Catalog, Commit, ExpiredCommit, Line, Operation, Tag
from catalog_app.names import COMMIT_ID_PREFIX
from lakeui.errors import ApplicationError, NotFoundError


@dataclass(frozen=True)
class Chain:
    """A commit's first-parent history as (line, up-to-seq) pairs: the commit's own line first."""

    commit: Commit
    segments: tuple[tuple[int, int], ...]

    def q(self) -> Q:
        condition = Q()
        for line_id, upto in self.segments:
            condition |= Q(line_id=line_id, seq__lte=upto)
        return condition

    def difference(self, other: "Chain") -> Q | None:
        """The rows recorded per commit (with line and seq) on one of the two chains and not on the other, as a
        filter; None when the chains hold the same rows. Two states differ only in what these rows wrote."""
        condition, found = Q(), False
        for one, two in ((self, other), (other, self)):
            below = dict(two.segments)
            for line_id, upto in one.segments:
                shared = below.get(line_id)
                if shared is None:
                    condition |= Q(line_id=line_id, seq__lte=upto)
                elif upto > shared:
                    condition |= Q(line_id=line_id, seq__gt=shared, seq__lte=upto)
                else:
                    continue
                found = True
        return condition if found else None


@dataclass(frozen=True)
class ResolvedRef:
    catalog: Catalog
    kind: str  # branch | tag | commit
    name: str
    commit: Commit
    branch: Branch | None

    @cached_property
    def chain(self) -> Chain:
        """Read when first needed: a read answered from its commit alone (a 304, a cached answer) never needs it."""
        return commit_chain(self.commit)


def timestamp_parse(value: str | None) -> datetime | None:
    """An ISO 8601 time for time travel (UTC when it names no zone); None for none."""
    if not value:
        return None
    message = f"{value[:100]!r} is not an ISO 8601 timestamp between years 1 and 9999 with an offset under 24h."
    try:
        moment = parse_datetime(value.strip().replace(" ", "T", 1))
        if moment is None:
            raise ApplicationError("invalid_timestamp", message, status=400)
        # In UTC, so a time at the edge of the calendar that an offset pushes past it fails here, not in a query.
        return make_aware(moment, UTC) if is_naive(moment) else moment.astimezone(UTC)
    except (ValueError, OverflowError):  # a well-formed but impossible date, year 0 or an offset of 24h or more
        raise ApplicationError("invalid_timestamp", message, status=400) from None


def catalog_list() -> QuerySet[Catalog]:
    return Catalog.objects.select_related("created_by")


def catalog_get(*, name: str) -> Catalog:
    catalog = Catalog.objects.filter(name=name).first()
    if catalog is None:
        raise NotFoundError("catalog_not_found", f"There is no catalog {name!r}.")
    return catalog


def catalog_find(*, name: str | None = None, catalog_id: object = None) -> Catalog | None:
    """The catalog of this name or id, or None."""
    if catalog_id is not None:
        return Catalog.objects.filter(id=catalog_id).first()
    return Catalog.objects.filter(name=name).first()


def catalog_by_id(catalog_id: object) -> Catalog:
    """The catalog a job's params name (`Catalog.DoesNotExist` if it is gone)."""
    return Catalog.objects.get(id=catalog_id)


def commit_chain(commit: Commit) -> Chain:
    """One query, however many branches deep the commit's line forked from: the line and its ancestors' forks."""
    line = Line._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH RECURSIVE up(parent_id, fork_seq, depth) AS ("
            f" SELECT parent_id, fork_seq, 0 FROM {line} WHERE id = %s"
            f" UNION ALL SELECT l.parent_id, l.fork_seq, up.depth + 1 FROM {line} l JOIN up ON l.id = up.parent_id"
            f") SELECT parent_id, fork_seq FROM up WHERE parent_id IS NOT NULL ORDER BY depth",
            [commit.line_id],
        )
        forks = [(parent_id, fork_seq) for parent_id, fork_seq in cursor.fetchall()]
    return Chain(commit=commit, segments=((commit.line_id, commit.seq), *forks))


def chain_after(chain: Chain, commit: Commit) -> Chain:
    """`commit_chain(commit)` without a query, for a commit just made after `chain`'s commit: its line goes on, or it
    starts a line forked there."""
    (line_id, _), *below = chain.segments
    if commit.line_id == line_id:
        return Chain(commit=commit, segments=((line_id, commit.seq), *below))
    return Chain(commit=commit, segments=((commit.line_id, commit.seq), *chain.segments))


def commits_newest_time(commit_ids: Iterable[str]) -> datetime | None:
    """When the newest of these commits was made (None: none of them exists)."""
    return Commit.objects.filter(id__in=list(commit_ids)).aggregate(newest=Max("created_at"))["newest"]


def commit_log(chain: Chain) -> QuerySet[Commit]:
    """The first-parent log, newest first."""
    return (
        Commit.objects.filter(chain.q(), catalog_id=chain.commit.catalog_id).select_related("author").order_by("-seq")
    )


@dataclass(frozen=True, slots=True)
class Author:
    username: str


@dataclass(frozen=True, slots=True)
class LogCommit:
    """A commit of the log as its answer shows it (CommitOutputSerializer), in plain values: a page of model
    instances (a commit and its author each) cost more than its query."""

    id: str
    seq: int
    parent_id: str | None
    merge_parent_id: str | None
    created_at: datetime
    author_id: int | None
    author: Author | None
    message: str


class CommitLog:
    """`commit_log` read a page at a time in plain SQL, for the API's log (lakeui/api/pagination.py slices it and
    counts it only when it is longer than its page): the ORM took longer to build its queries than the database to
    answer them. Each commit comes as a LogCommit, with its author's username."""

    def __init__(self, chain: Chain) -> None:
        condition = " OR ".join("(m.line_id = %s AND m.seq <= %s)" for _ in chain.segments)
        self.where = f"m.catalog_id = %s AND ({condition})"
        self.params = [chain.commit.catalog_id, *(value for segment in chain.segments for value in segment)]

    def count(self) -> int:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {Commit._meta.db_table} m WHERE {self.where}", self.params)
            return cursor.fetchone()[0]

    def __getitem__(self, key: slice) -> list[LogCommit]:
        sql = (
            f"SELECT m.id, m.seq, m.parent_id, m.merge_parent_id, m.created_at, m.author_id, a.username, m.message"
            f" FROM {Commit._meta.db_table} m LEFT JOIN {get_user_model()._meta.db_table} a ON a.id = m.author_id"
            f" WHERE {self.where} ORDER BY m.seq DESC"
        )
        rows = sql_slice(sql, self.params, key)
        return [
            LogCommit(id, seq, parent, merge, at, author_id, None if author_id is None else Author(name), message)
            for id, seq, parent, merge, at, author_id, name, message in rows
        ]


def sql_slice(sql: str, params: list, key: slice) -> list[tuple]:
    """The rows of an ordered query in the slice `key` (a paginator's page: LIMIT and OFFSET bound)."""
    start, stop = key.start or 0, key.stop
    params = list(params)
    if stop is not None:
        sql += " LIMIT %s"
        params.append(max(0, stop - start))
    with connection.cursor() as cursor:
        cursor.execute(f"{sql} OFFSET %s", [*params, start])
        return cursor.fetchall()


def commit_by_id(commit_id: str) -> Commit:
    """A commit a job's params name, with its catalog."""
    return Commit.objects.select_related("catalog").get(id=commit_id)


# A commit's place in the graph, as `commit_node` reads it: (id, seq, line id, parent id, merge parent id).
COMMIT_NODE_FIELDS = ("id", "seq", "line_id", "parent_id", "merge_parent_id")


def commit_node(*, catalog_id: object, commit_id: str) -> tuple | None:
    """The commit's place in the graph (`COMMIT_NODE_FIELDS`, plain values), or None if the catalog has no such
    commit."""
    return Commit.objects.filter(catalog_id=catalog_id, id=commit_id).values_list(*COMMIT_NODE_FIELDS).first()


def commit_nodes_before(*, line_id: int, seq: int, window: int) -> QuerySet:
    """The commits of a line whose sequence numbers are in the `window` before `seq`, as `commit_node` rows: a window
    of sequence numbers, not "the `window` before", so a bounded range scan whatever the planner's statistics."""
    return Commit.objects.filter(line_id=line_id, seq__lt=seq, seq__gte=seq - window).values_list(*COMMIT_NODE_FIELDS)


def commit_of_job(job: object) -> Commit | None:
    """The commit a data job made, if it made one (a job delivered again after its commit)."""
    return Commit.objects.filter(job=job).first()


def commit_operations(commit: Commit) -> QuerySet[Operation]:
    return commit.operations.all()


def merge_commit_ids(*, catalog: Catalog) -> list[str]:
    """The ids of the catalog's merge commits (those with a second parent)."""
    return list(Commit.objects.filter(catalog=catalog, merge_parent__isnull=False).values_list("id", flat=True))


def commit_at(chain: Chain, at: datetime) -> Commit:
    """The newest commit of the chain made at or before `at`. Commit times rise along the chain, so the first
    segment (newest first) holding such a commit holds the answer; each look-up is one index probe."""
    for line_id, upto in chain.segments:
        commit = (
            Commit.objects.filter(line_id=line_id, seq__lte=upto, created_at__lte=at)
            .order_by("-created_at", "-seq")
            .first()
        )
        if commit is not None:
            return commit_unexpired(commit, chain)
    raise NotFoundError("no_commit_at", f"The ref has no commit at or before {at.isoformat()}.")


def commits_newest(*, catalog: Catalog, limit: int) -> list[Commit]:
    """The catalog's newest commits on any line, newest first, with their branch and author (the branch graph)."""
    commits = Commit.objects.filter(catalog=catalog).select_related("line__branch", "author").order_by("-seq")
    return list(commits[:limit])


def commit_get(*, catalog: Catalog, commit_id: str) -> Commit:
    if not COMMIT_ID_PREFIX.fullmatch(commit_id):
        raise NotFoundError("commit_not_found", f"There is no commit {commit_id!r}.")
    lookup = {"id": commit_id} if len(commit_id) == 32 else {"id__startswith": commit_id}
    matches = list(Commit.objects.filter(catalog=catalog, **lookup)[:2])
    if not matches:
        raise NotFoundError("commit_not_found", f"There is no commit {commit_id!r}.")
    if len(matches) > 1:
        raise ApplicationError("ambiguous_commit", f"Commit id prefix {commit_id!r} names several commits.")
    return commit_unexpired(matches[0], None)


def commit_unexpired(commit: Commit, chain: Chain | None) -> Commit:
    """The commit, unless retention expired it (docs/retention.md): then `410 history_expired` naming the oldest
    point kept: of `chain` (the ref read at a time), or for a commit named by id, the oldest kept commit after it
    on its own line (where its branch's kept history starts)."""
    if not ExpiredCommit.objects.filter(commit_id=commit.id).exists():
        return commit
    oldest = history_oldest_kept(chain) if chain is not None else _kept_after(commit)
    named = f"{oldest.id} ({oldest.created_at.isoformat()})" if oldest is not None else "none"
    raise ApplicationError(
        "history_expired",
        f"Commit {commit.id} made at {commit.created_at.isoformat()} was removed from time travel by the catalog's "
        f"retention rules; the oldest point kept is {named}.",
        status=410,
        details={"commit": commit.id, "oldest_kept": _point(oldest)},
    )


def commits_expired(commit_ids: list[str | None]) -> list[str]:
    """Which of these commits retention expired: an audit log naming one says so (its metadata is kept)."""
    named = [commit_id for commit_id in commit_ids if commit_id]
    return sorted(ExpiredCommit.objects.filter(commit_id__in=named).values_list("commit_id", flat=True))


def _point(commit: Commit | None) -> dict | None:
    return None if commit is None else {"commit": commit.id, "created_at": commit.created_at.isoformat()}


def _expired_ids(catalog_id) -> QuerySet:
    return ExpiredCommit.objects.filter(catalog_id=catalog_id).values("commit_id")


def _kept_after(commit: Commit) -> Commit | None:
    return (
        Commit.objects.filter(line_id=commit.line_id, seq__gt=commit.seq)
        .exclude(id__in=_expired_ids(commit.catalog_id))
        .order_by("seq")
        .first()
    )


def history_oldest_kept(chain: Chain) -> Commit | None:
    """Where the chain's unbroken time travel starts: the commit after its newest expired commit (its oldest
    commit when none expired)."""
    newer: Commit | None = chain.commit
    for line_id, upto in chain.segments:
        in_segment = Commit.objects.filter(line_id=line_id, seq__lte=upto)
        expired = in_segment.filter(id__in=_expired_ids(chain.commit.catalog_id)).order_by("-seq").first()
        if expired is not None:
            after = in_segment.filter(seq__gt=expired.seq).order_by("seq").first()
            return after or newer
        newer = in_segment.order_by("seq").first() or newer
    return newer


def branch_list(*, catalog: Catalog) -> QuerySet[Branch]:
    return Branch.objects.filter(catalog=catalog).select_related("head", "created_by")


def _named(refs: QuerySet, *, kind: str, name: str, catalog: Catalog):
    found = refs.filter(name=name).first()
    if found is None:
        raise NotFoundError(f"{kind}_not_found", f"There is no {kind} {name!r} in catalog {catalog.name!r}.")
    return found


def branch_get(*, catalog: Catalog, name: str) -> Branch:
    return _named(branch_list(catalog=catalog), kind="branch", name=name, catalog=catalog)


def branch_heads(*, catalog_id: object, names: list[str]) -> dict[str, str]:
    """The head commit id of each of these branches that exists, by name."""
    return dict(Branch.objects.filter(catalog_id=catalog_id, name__in=names).values_list("name", "head_id"))


def tag_list(*, catalog: Catalog) -> QuerySet[Tag]:
    return Tag.objects.filter(catalog=catalog).select_related("commit", "created_by")


def tag_get(*, catalog: Catalog, name: str) -> Tag:
    return _named(tag_list(catalog=catalog), kind="tag", name=name, catalog=catalog)


def tag_exists(*, catalog: Catalog, name: str) -> bool:
    return Tag.objects.filter(catalog=catalog, name=name).exists()


def ref_resolve(*, catalog: Catalog, ref: str, at: datetime | None = None) -> ResolvedRef:
    """A branch, a tag or a commit id (or a unique prefix of 8+ hex digits), optionally as of a time."""
    branch = branch_list(catalog=catalog).filter(name=ref).first()
    if branch is not None:
        kind, commit = "branch", branch.head
    else:
        tag = tag_list(catalog=catalog).filter(name=ref).first()
        if tag is not None:
            kind, commit = "tag", tag.commit
        elif COMMIT_ID_PREFIX.fullmatch(ref):
            kind, commit = "commit", commit_get(catalog=catalog, commit_id=ref)
        else:
            raise NotFoundError("ref_not_found", f"There is no branch, tag or commit {ref!r}.")
    if at is not None:
        commit = commit_at(commit_chain(commit), at)
    return ResolvedRef(catalog=catalog, kind=kind, name=ref, commit=commit, branch=branch)
