"""Retention plans (docs/retention.md): which commits a rule set removes from time travel, and which files that frees.

A ref's history is its commit's first-parent chain (a few (line, up-to-seq) ranges, catalog_app.models). A rule
keeps the newest part of each matching ref's chain: the newest `keep_commits` commits and every commit a read
within the last `keep_days` days resolves to (the commits made since, and the one that was the head at the cutoff);
the more generous of the two when both are given. A commit goes only when every ref whose history holds it lets it
go and nothing pins it (a ref's head, a tag, the merge bases of live branches and open
merge requests, every commit that can be a merge base: see `_Lines.graph_pins`). A commit in no ref's history is
kept (the default keeps everything): virtual merge bases, for one.

A file is reclaimed only when no kept commit of any ref references it: it is live at a commit when its newest entry
along the commit's chain adds it. That is decided per file from its entries and the kept commits of each line,
without walking any chain commit by commit, so a catalog of 100,000 commits and 1,000,000 files plans in seconds.
"""

import bisect
import fnmatch
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db import connection
from django.utils import timezone

from catalog_app.models import (
    Branch,
    Catalog,
    Commit,
    DataFile,
    ExpiredCommit,
    FileEntry,
    Line,
    ObjectKind,
    ReclaimedFile,
    RetentionRule,
    Subscription,
    Tag,
)
from catalog_app.selectors.objects import objects_at
from catalog_app.selectors.refs import Chain, commit_chain

Pin = tuple[str, str]  # a commit id and why it must stay
LISTED = 1000  # commit ids listed per ref in an answer; counts are always whole
FETCH = 50_000  # rows read (or commit ids written) per round trip
GONE = "retention_gone"  # a temporary table of the plan's expired commits


@dataclass(frozen=True)
class Rule:
    pattern: str
    keep_days: int | None = None
    keep_commits: int | None = None

    def matches(self, name: str) -> bool:
        return fnmatch.fnmatchcase(name, self.pattern)

    @property
    def keeps_all(self) -> bool:
        return self.keep_days is None and self.keep_commits is None

    def as_dict(self) -> dict:
        return {"pattern": self.pattern, "keep_days": self.keep_days, "keep_commits": self.keep_commits}


def rules_get(*, catalog: Catalog) -> list[Rule]:
    rows = RetentionRule.objects.filter(catalog=catalog).order_by("position")
    return [Rule(r.pattern, r.keep_days, r.keep_commits) for r in rows]


def rule_for(rules: list[Rule], name: str) -> Rule | None:
    """The first rule matching the ref's name, or None (keep everything)."""
    return next((rule for rule in rules if rule.matches(name)), None)


@dataclass
class RefExpiry:
    name: str
    kind: str  # branch | tag
    rule: Rule | None
    expiring: list[str] = field(default_factory=list)  # commit ids of its history that go, newest first
    oldest_kept: dict | None = None  # where its unbroken time travel starts after the expiry
    files: int = 0
    bytes: int = 0
    must_keep: list[dict] = field(default_factory=list)  # {commit, created_at, reasons} a rule let go but must stay
    kept_for_other_refs: int = 0  # commits its rule let go that another ref's rule keeps

    def as_dict(self) -> dict:
        return {
            "ref": self.name, "kind": self.kind, "rule": self.rule.as_dict() if self.rule else None,
            "commits_expiring": len(self.expiring), "expiring": self.expiring[:LISTED],
            "oldest_kept": self.oldest_kept, "files_reclaimed": self.files, "bytes_reclaimed": self.bytes,
            "must_keep": self.must_keep[:LISTED], "kept_for_other_refs": self.kept_for_other_refs,
        }  # fmt: skip


@dataclass
class Expiry:
    """What expiring by the rules would do now: the preview, and what `retention_expire` applies."""

    catalog_id: object
    last_seq: int
    rules: list[Rule]
    now: datetime
    refs: list[RefExpiry]
    expiring: set[str]  # commit ids newly expired
    reclaimed: dict[str, int]  # file id -> bytes, files newly reclaimed
    snapshot: tuple  # refs_snapshot when the plan was made (expiry checks it unchanged under the lock)

    def as_dict(self) -> dict:
        return {
            "rules": [r.as_dict() for r in self.rules],
            "now": self.now.isoformat(),
            "commits_expiring": len(self.expiring),
            "files_reclaimed": len(self.reclaimed),
            "bytes_reclaimed": sum(self.reclaimed.values()),
            "refs": [r.as_dict() for r in self.refs],
        }


class _Lines:
    """The catalog's commits per line (sorted by seq) and its lines' forks."""

    def __init__(self, catalog_id) -> None:
        self.seqs: dict[int, list[int]] = defaultdict(list)
        self.ids: dict[int, list[str]] = defaultdict(list)
        self.times: dict[int, list[datetime]] = defaultdict(list)
        self.by_id: dict[str, tuple[int, int]] = {}
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id, line_id, seq, created_at, merge_parent_id FROM {Commit._meta.db_table}"
                " WHERE catalog_id = %s ORDER BY seq",
                [catalog_id],
            )
            self.merged_from: set[str] = set()
            for commit_id, line_id, seq, created_at, merge_parent in cursor:
                if merge_parent is not None:
                    self.merged_from.add(merge_parent)
                self.seqs[line_id].append(seq)
                self.ids[line_id].append(commit_id)
                self.times[line_id].append(created_at)
                self.by_id[commit_id] = (line_id, seq)
        self.parent: dict[int, tuple[int, int] | None] = {}
        self.forks: dict[int, list[tuple[int, int]]] = defaultdict(list)  # line -> [(fork seq, child line)], sorted
        for line_id, parent_id, fork_seq in Line.objects.filter(catalog_id=catalog_id).values_list(
            "id", "parent_id", "fork_seq"
        ):
            self.parent[line_id] = (parent_id, fork_seq) if parent_id is not None else None
            if parent_id is not None:
                self.forks[parent_id].append((fork_seq, line_id))
        for forks in self.forks.values():
            forks.sort()

    def chain(self, commit_id: str) -> list[tuple[int, int]]:
        line_id, seq = self.by_id[commit_id]
        segments = [(line_id, seq)]
        while (up := self.parent.get(line_id)) is not None:
            line_id, seq = up
            segments.append(up)
        return segments

    def graph_pins(self) -> list[Pin]:
        """Every commit that can be a merge base of two commits: a merge base C of A and B that is neither is
        reached from both by a last step from two different children (else that child were a newer common
        ancestor); unless one step is a merge's second parent (C is merged from), C is the first parent of two
        commits, so a line forks at C. Keeping these keeps every merge base of live branches and open merge
        requests, criss-cross bases included, whatever is merged later."""
        pins = [(commit_id, "merged from here: a merge base of later merges") for commit_id in self.merged_from]
        for up in self.parent.values():
            if up is not None:
                parent_id, fork_seq = up
                position = bisect.bisect_left(self.seqs[parent_id], fork_seq)
                if position < len(self.seqs[parent_id]) and self.seqs[parent_id][position] == fork_seq:
                    pins.append((self.ids[parent_id][position], "a branch forks here: a merge base"))
        return pins

    def upto(self, line_id: int, seq: int) -> int:
        """How many commits of the line are at or before `seq`."""
        return bisect.bisect_right(self.seqs[line_id], seq)


def _ref_keep_from(lines: _Lines, segments: list[tuple[int, int]], rule: Rule | None, now: datetime) -> tuple:
    """Where the rule's kept part of the chain ends, oldest side: (segment index, seq), or None to keep it all."""
    if rule is None or rule.keeps_all:
        return None
    positions = []
    if rule.keep_commits is not None:
        left, found = rule.keep_commits, None
        for index, (line_id, upto) in enumerate(segments):
            count = lines.upto(line_id, upto)
            if left <= count:
                found = (index, lines.seqs[line_id][count - left])
                break
            left -= count
        positions.append(found)
    if rule.keep_days is not None:
        cutoff, found = days_before(now, rule.keep_days), None
        for index, (line_id, upto) in enumerate(segments):
            count = lines.upto(line_id, upto)
            at = bisect.bisect_right(lines.times[line_id], cutoff, 0, count) - 1
            if at >= 0:  # the head at the cutoff: a read at the cutoff resolves to it
                found = (index, lines.seqs[line_id][at])
                break
        positions.append(found)
    if any(p is None for p in positions):  # a part of the rule keeps the whole chain
        return None
    return max(positions, key=lambda p: (p[0], -p[1]))  # the older: the union of what each part keeps


def days_before(now: datetime, days: int) -> datetime:
    """The moment `days` days before `now`; before the first representable moment (a rule may keep 1,000,000
    days, some 2,700 years: more than lies between now and year 1), that first moment, which every commit follows:
    the rule then keeps the whole chain."""
    try:
        return now - timedelta(days=days)
    except OverflowError:
        return datetime.min.replace(tzinfo=UTC)


def refs_snapshot(catalog_id) -> tuple:
    """The catalog's last commit and its refs: a plan holds while these are unchanged."""
    last_seq = Catalog.objects.filter(id=catalog_id).values_list("last_seq", flat=True).get()
    branches = tuple(sorted(Branch.objects.filter(catalog_id=catalog_id).values_list("name", "head_id")))
    tags = tuple(sorted(Tag.objects.filter(catalog_id=catalog_id).values_list("name", "commit_id")))
    return last_seq, branches, tags


def retention_expiry(*, catalog: Catalog, rules: list[Rule], now: datetime | None = None) -> Expiry:
    """What expiring by `rules` now would remove, per ref, and which files no kept commit would reference."""
    now = now or timezone.now()
    catalog_id = catalog.id
    snapshot = refs_snapshot(catalog_id)
    last_seq, branches, tags = snapshot[0], dict(snapshot[1]), dict(snapshot[2])
    lines = _Lines(catalog_id)
    already = set(ExpiredCommit.objects.filter(catalog_id=catalog_id).values_list("commit_id", flat=True))
    pins: dict[str, list[str]] = defaultdict(list)
    for name, head in sorted(branches.items()):
        pins[head].append(f"head of branch {name}")
    for name, commit_id in sorted(tags.items()):
        pins[commit_id].append(f"tagged {name}")
    for commit_id, why in lines.graph_pins():
        pins[commit_id].append(why)
    for name, cursor, end in Subscription.objects.filter(catalog_id=catalog_id).values_list(
        "name", "cursor_id", "batch_end_id"
    ):  # what a consumer has not acknowledged yet is read from these (docs/changes.md#subscriptions)
        for commit_id in {cursor, end} - {None}:
            pins[commit_id].append(f"held by subscription {name}")

    refs = [RefExpiry(n, "branch", rule_for(rules, n)) for n in sorted(branches)]
    refs += [RefExpiry(n, "tag", rule_for(rules, n)) for n in sorted(tags)]
    heads = {**{("branch", n): h for n, h in branches.items()}, **{("tag", n): c for n, c in tags.items()}}
    covered: dict[int, int] = defaultdict(lambda: -1)  # line -> the newest seq any ref's history holds
    kept: dict[int, list[tuple[int, int]]] = defaultdict(list)  # line -> [(from seq, to seq)] a rule keeps
    chains = {}
    for ref in refs:
        segments = chains[ref.name, ref.kind] = lines.chain(heads[ref.kind, ref.name])
        keep_from = _ref_keep_from(lines, segments, ref.rule, now)
        for index, (line_id, upto) in enumerate(segments):
            covered[line_id] = max(covered[line_id], upto)
            if keep_from is None or index < keep_from[0]:
                kept[line_id].append((-1, upto))
            elif index == keep_from[0]:
                kept[line_id].append((keep_from[1], upto))

    expiring: set[str] = set()
    pinned_wanted: set[str] = set()
    for line_id, newest in covered.items():
        starts, ends = _merged(kept.get(line_id, []))
        for seq, commit_id in zip(lines.seqs[line_id], lines.ids[line_id], strict=True):
            if seq > newest:
                break
            at = bisect.bisect_right(starts, seq) - 1
            if commit_id in already or (at >= 0 and seq <= ends[at]):
                continue
            (pinned_wanted if commit_id in pins else expiring).add(commit_id)
    gone = already | expiring

    # Per ref: what goes from its history, what its rule let go that must stay, where its time travel starts.
    commit_refs: dict[str, list[RefExpiry]] = defaultdict(list)
    gone_seqs, marked = defaultdict(list), defaultdict(list)  # per line, sorted: expired seqs; expiring or pinned
    for line_id, ids in lines.ids.items():
        for seq, commit_id in zip(lines.seqs[line_id], ids, strict=True):
            if commit_id in gone:
                gone_seqs[line_id].append(seq)
            if commit_id in expiring or commit_id in pinned_wanted:
                marked[line_id].append(seq)
    for ref in refs:
        segments = chains[ref.name, ref.kind]
        keep_from = _ref_keep_from(lines, segments, ref.rule, now)
        for index, (line_id, upto) in enumerate(segments):
            if keep_from is not None and index >= keep_from[0]:
                below = keep_from[1] if index == keep_from[0] else upto + 1  # the rule lets go of seqs below this
                _ref_let_go(ref, lines, line_id, below, marked, gone_seqs, expiring, pins, commit_refs)
        ref.oldest_kept = _oldest_kept(lines, segments, gone_seqs)

    reclaimed = _files_reclaimed(catalog_id, lines, gone, commit_refs) if expiring else {}
    return Expiry(catalog_id, last_seq, rules, now, refs, expiring, reclaimed, snapshot)


def _merged(ranges: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """Inclusive ranges merged into disjoint ones, as their sorted starts and ends."""
    starts: list[int] = []
    ends: list[int] = []
    for start, end in sorted(ranges):
        if ends and start <= ends[-1] + 1:
            ends[-1] = max(ends[-1], end)
        else:
            starts.append(start)
            ends.append(end)
    return starts, ends


def _ref_let_go(ref, lines, line_id, below, marked, gone_seqs, expiring, pins, commit_refs) -> None:
    """Sort the commits of the line below seq `below` that the ref's rule lets go: expiring, pinned (must keep),
    or kept by another ref's rule. Only marked commits are visited: the rest are counted."""
    seqs = marked[line_id]
    for at in range(bisect.bisect_left(seqs, below) - 1, -1, -1):
        position = bisect.bisect_left(lines.seqs[line_id], seqs[at])
        commit_id = lines.ids[line_id][position]
        if commit_id in expiring:
            ref.expiring.append(commit_id)
            commit_refs[commit_id].append(ref)
        else:
            when = lines.times[line_id][position].isoformat()
            ref.must_keep.append({"commit": commit_id, "created_at": when, "reasons": pins[commit_id]})
    let_go = bisect.bisect_left(lines.seqs[line_id], below) - bisect.bisect_left(seqs, below)
    ref.kept_for_other_refs += let_go - _expired_before(gone_seqs, line_id, below, seqs)


def _expired_before(gone_seqs, line_id, below, marked_seqs) -> int:
    """Expired before (gone, not marked as expiring now) below the seq."""
    gone = gone_seqs[line_id][: bisect.bisect_left(gone_seqs[line_id], below)]
    marked = set(marked_seqs[: bisect.bisect_left(marked_seqs, below)])
    return sum(1 for seq in gone if seq not in marked)


def _oldest_kept(lines: _Lines, segments: list[tuple[int, int]], gone_seqs) -> dict | None:
    """The oldest commit of the chain after its newest expired one (its oldest commit when none expired)."""
    oldest = None  # (line, position)
    for line_id, upto in segments:
        count = lines.upto(line_id, upto)
        newest_gone = bisect.bisect_right(gone_seqs[line_id], upto) - 1
        if newest_gone >= 0:
            after = lines.upto(line_id, gone_seqs[line_id][newest_gone])
            oldest = (line_id, after) if after < count else oldest
            break
        oldest = (line_id, 0) if count else oldest
    if oldest is None:
        return None
    line_id, position = oldest
    return {"commit": lines.ids[line_id][position], "created_at": lines.times[line_id][position].isoformat()}


def _files_reclaimed(catalog_id, lines: _Lines, gone: set[str], commit_refs: dict[str, list[RefExpiry]]) -> dict:
    """The files (not reclaimed before) that no kept commit references, with their bytes, each counted to the refs
    whose expired history added it."""
    kept_seqs = {line_id: [s for s, c in zip(seqs, lines.ids[line_id], strict=True) if c not in gone]
                 for line_id, seqs in lines.seqs.items()}  # fmt: skip

    def kept_between(line_id: int, low: int, high: float) -> bool:
        seqs = kept_seqs.get(line_id, ())
        at = bisect.bisect_left(seqs, low)
        return at < len(seqs) and seqs[at] < high

    def forks_between(line_id: int, low: int, high: float) -> list[int]:
        forks = lines.forks.get(line_id, ())
        at = bisect.bisect_left(forks, (low, -1))
        found = []
        while at < len(forks) and forks[at][0] < high:
            found.append(forks[at][1])
            at += 1
        return found

    def live_somewhere(entries: dict[int, list[tuple[int, bool]]]) -> bool:
        inherited: list[int] = []
        for line_id, own in entries.items():
            for index, (seq, removed) in enumerate(own):
                if removed:
                    continue
                end = own[index + 1][0] if index + 1 < len(own) else float("inf")
                if kept_between(line_id, seq, end):
                    return True
                inherited += forks_between(line_id, seq, end)
        seen: set[int] = set()
        while inherited:
            line_id = inherited.pop()
            if line_id in seen:
                continue
            seen.add(line_id)
            own = entries.get(line_id)
            first = own[0][0] if own else float("inf")
            if kept_between(line_id, -1, first):
                return True
            inherited += forks_between(line_id, -1, first)
        return False

    reclaimed: dict[str, int] = {}
    with connection.cursor() as cursor:  # the commits gone, where the query below can join them
        cursor.execute(f"CREATE TEMPORARY TABLE IF NOT EXISTS {GONE} (id varchar(32) PRIMARY KEY)")
        cursor.execute(f"TRUNCATE {GONE}")
        ordered = sorted(gone)
        for start in range(0, len(ordered), FETCH):
            cursor.execute(f"INSERT INTO {GONE} SELECT unnest(%s::text[])", [ordered[start : start + FETCH]])
    table, files, done = FileEntry._meta.db_table, DataFile._meta.db_table, ReclaimedFile._meta.db_table
    order = "ORDER BY e.line_id, e.seq"
    with connection.chunked_cursor() as cursor:
        # Only candidates: a file some kept commit adds is live there. Each candidate's entries in one row.
        cursor.execute(
            f"SELECT e.file_id::text, max(f.size_bytes), array_agg(e.line_id {order}), array_agg(e.seq {order}),"
            f" array_agg(e.removed {order}) FROM {table} e JOIN {files} f ON f.id = e.file_id"
            f" LEFT JOIN {GONE} g ON g.id = e.commit_id LEFT JOIN {done} r ON r.file_id = e.file_id"
            f" WHERE e.catalog_id = %s AND r.file_id IS NULL GROUP BY e.file_id"
            f" HAVING bool_and(e.removed OR g.id IS NOT NULL)",
            [catalog_id],
        )
        while rows := cursor.fetchmany(FETCH):
            for file_id, size, line_ids, seqs, removals in rows:
                entries: dict[int, list[tuple[int, bool]]] = defaultdict(list)
                for line_id, seq, removed in zip(line_ids, seqs, removals, strict=True):
                    entries[line_id].append((seq, removed))
                if live_somewhere(entries):
                    continue
                reclaimed[file_id] = size
                owners = {}
                for line_id, seq, removed in zip(line_ids, seqs, removals, strict=True):
                    if not removed:
                        position = bisect.bisect_left(lines.seqs[line_id], seq)
                        owners.update((id(r), r) for r in commit_refs.get(lines.ids[line_id][position], ()))
                for ref in owners.values():
                    ref.files += 1
                    ref.bytes += size
    return reclaimed


def _live_at(chain: Chain) -> dict[str, tuple]:
    """The files live at a commit, every table: file id -> (table id, bytes). One query."""
    newest = (
        FileEntry.objects.filter(chain.q(), catalog_id=chain.commit.catalog_id)
        .order_by("file_id", "-seq")
        .distinct("file_id")
        .values_list("file_id", "table_id", "removed", "file__size_bytes")
    )
    return {str(f): (t, size) for f, t, removed, size in newest if not removed}


def storage_per_branch(*, catalog: Catalog) -> list[dict]:
    """What each branch's current state costs, per table: the bytes of the files live at its head that no other
    branch or tag head holds (`bytes_only`: what deleting the branch frees once its history expires) and those
    another ref's head holds too (`bytes_shared`). One query per branch and tag. History a ref keeps is priced by the
    retention preview."""
    branches = list(Branch.objects.filter(catalog=catalog).select_related("head").order_by("name"))
    tags = list(Tag.objects.filter(catalog=catalog).select_related("commit"))
    live = {("branch", b.name): _live_at(commit_chain(b.head)) for b in branches}
    live |= {("tag", t.name): _live_at(commit_chain(t.commit)) for t in tags}
    holders: dict[str, int] = defaultdict(int)
    for files in live.values():
        for file_id in files:
            holders[file_id] += 1
    answer = []
    for branch in branches:
        files = live["branch", branch.name]
        chain = commit_chain(branch.head)
        names = {v.object_id: v.name for v in objects_at(chain, kind=ObjectKind.TABLE)}
        databases = {v.object_id: v.name for v in objects_at(chain, kind=ObjectKind.DATABASE)}
        parents = dict(objects_at(chain, kind=ObjectKind.TABLE).values_list("object_id", "parent_id"))
        tables: dict = defaultdict(lambda: {"files": 0, "bytes_only": 0, "bytes_shared": 0})
        for file_id, (table_id, size) in files.items():
            row = tables[table_id]
            row["files"] += 1
            row["bytes_only" if holders[file_id] == 1 else "bytes_shared"] += size
        listed = [
            {"table": f"{databases.get(parents.get(t), '?')}.{names.get(t, '?')}", "table_id": str(t), **row}
            for t, row in tables.items()
        ]
        listed.sort(key=lambda r: r["table"])
        answer.append({
            "branch": branch.name, "head": branch.head_id,
            "bytes_only": sum(r["bytes_only"] for r in listed), "bytes_shared": sum(r["bytes_shared"] for r in listed),
            "tables": listed,
        })  # fmt: skip
    return answer
