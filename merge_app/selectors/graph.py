"""The commit graph of a catalog, walked from two heads: their merge bases and the commits each side made since.

A side's commits since the merge base are git's `rev-list base..head`: the commits reachable from its head and
not from the other head (with one merge base, the commits both heads reach are exactly the base's history).
They are found as git's `paint_down_to_common` finds them: commits are taken newest first (by the catalog-wide
sequence number, which rises from every parent to its child, so a commit is taken only after every commit made
from it), each painted with the sides that reach it; a commit both sides reach is a common ancestor, and the
walk stops once every commit still queued is reached by both. So the walk costs the commits since the fork,
never the catalog's whole history: commits are loaded as the walk reaches them, a run of each line at a time.
"""

import heapq
from dataclasses import dataclass

from catalog_app.models import Commit
from catalog_app.selectors.refs import branch_list, commit_node, commit_nodes_before

SOURCE, TARGET, STALE = 1, 2, 4
# Sequence numbers read ahead along a line (a line is a run of first parents, see catalog_app.models): WINDOW at
# first, doubled at each load of the same walk up to MAX_WINDOW, so that a short walk reads a few commits and a walk
# of 10,000 commits a few loads (not 20).
WINDOW, MAX_WINDOW = 512, 8192


@dataclass(frozen=True, slots=True)
class Node:
    seq: int
    line: int
    parent: str | None
    merge_parent: str | None

    @property
    def parents(self) -> tuple[str, ...]:
        return tuple(p for p in (self.parent, self.merge_parent) if p is not None)


@dataclass(frozen=True)
class Sides:
    """What two heads have in common and what each made since."""

    bases: list[str]  # the merge bases, newest first: one, except in criss-cross histories
    source: list[str]  # commits reachable from the source head and not from the target head, oldest first
    target: list[str]  # likewise for the target head


class CommitGraph:
    """The commits of one catalog that a walk reaches, loaded on demand."""

    def __init__(self, catalog_id) -> None:
        self.catalog_id = catalog_id
        self.nodes: dict[str, Node] = {}
        self.queries = 0
        self.walked = 0  # commits the last walk reached
        self.window = WINDOW

    def node(self, commit_id: str) -> Node:
        if commit_id not in self.nodes:
            self._load(commit_id)
        return self.nodes[commit_id]

    def _load(self, commit_id: str) -> None:
        """The commit, and the commits before it on its line: its first parents, mostly, which the walk takes
        next."""
        row = commit_node(catalog_id=self.catalog_id, commit_id=commit_id)
        self.queries += 1
        if row is None:
            raise Commit.DoesNotExist(commit_id)
        # A window of sequence numbers, not "the 512 before": a bounded range scan whatever the planner's statistics
        before = commit_nodes_before(line_id=row[2], seq=row[1], window=self.window)
        self.queries += 1
        self.window = min(self.window * 2, MAX_WINDOW)
        for commit_id_, seq, line, parent, merge_parent in [row, *before]:
            self.nodes.setdefault(commit_id_, Node(seq, line, parent, merge_parent))

    def sides(self, source: str, target: str) -> Sides:
        paint: dict[str, int] = {}
        queue: list[tuple[int, str]] = []

        def push(commit_id: str, flags: int) -> None:
            if paint.get(commit_id, 0) & flags != flags:
                paint[commit_id] = paint.get(commit_id, 0) | flags
                heapq.heappush(queue, (-self.node(commit_id).seq, commit_id))

        push(source, SOURCE)
        push(target, TARGET)
        bases: list[str] = []
        popped: set[str] = set()
        while any(not paint[commit_id] & STALE for _, commit_id in queue):
            _, commit_id = heapq.heappop(queue)
            if commit_id in popped:  # pushed again with more paint before its turn: the same commit
                continue
            popped.add(commit_id)
            flags = paint[commit_id]
            if flags == SOURCE | TARGET:
                bases.append(commit_id)
                flags |= STALE
                paint[commit_id] = flags
            for parent in self.node(commit_id).parents:
                push(parent, flags)
        self.walked = len(paint)
        only = {
            side: sorted((c for c, f in paint.items() if f & (SOURCE | TARGET) == side), key=self._seq)
            for side in (SOURCE, TARGET)
        }
        return Sides(bases=bases, source=only[SOURCE], target=only[TARGET])

    def reaches(self, head: str, commit_id: str) -> bool:
        """Whether `head`'s history holds `commit_id` (it is `head` or one of its ancestors)."""
        return not self.sides(commit_id, head).source

    def _seq(self, commit_id: str) -> int:
        return self.nodes[commit_id].seq

    def first_parents_apart(self, a: str, b: str) -> tuple[list[str], list[str]]:
        """The first-parent chains of `a` and of `b` down to the first commit both reach by first parents
        (excluded), each newest first: walked together by sequence number, so each costs its own commits only."""
        chains: tuple[list[str], list[str]] = ([], [])
        at = [a, b]
        while at[0] != at[1]:
            side = 0 if at[1] is None or (at[0] is not None and self.node(at[0]).seq > self.node(at[1]).seq) else 1
            chains[side].append(at[side])
            at[side] = self.node(at[side]).parent
        return chains

    def first_parents(self, head: str, within: set[str]) -> list[str]:
        """`head`'s first-parent chain as long as it stays in `within`, oldest first (once it leaves a side's
        commits it never comes back: every first parent of a base's ancestor is one too)."""
        chain, current = [], head
        while current is not None and current in within:
            chain.append(current)
            current = self.node(current).parent
        return chain[::-1]


def branches_with_commit(*, catalog, commit_id: str) -> tuple[list[str], list[str]]:
    """The catalog's branches split by whether their history has the commit (where it can be reverted) or not
    (where it can be cherry-picked), each in the catalog's order with its default branch first. One walk per
    branch, from its head down to the commit's fork at most."""
    graph = CommitGraph(catalog.id)
    having, lacking = [], []
    branches = sorted(branch_list(catalog=catalog), key=lambda b: (b.name != catalog.default_branch, b.name))
    for branch in branches:
        has = branch.head_id == commit_id or not graph.sides(commit_id, branch.head_id).source
        (having if has else lacking).append(branch.name)
    return having, lacking
