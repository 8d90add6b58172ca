"""The commit graph of a catalog: common ancestors, and the commits a side made since one.

A merge commit records, as operations of its own, every change it brought in; so the changes of a branch since a
commit are the operations on its first-parent chain back to that commit's history, minus the merge commits that
only brought in what that history already holds.
"""

from dataclasses import dataclass

from catalog_app.models import Catalog, Commit


@dataclass(frozen=True)
class Node:
    seq: int
    parent: str | None
    merge_parent: str | None


class CommitGraph:
    def __init__(self, nodes: dict[str, Node]) -> None:
        self.nodes = nodes

    @classmethod
    def of(cls, catalog: Catalog) -> "CommitGraph":
        rows = Commit.objects.filter(catalog=catalog).values_list("id", "seq", "parent_id", "merge_parent_id")
        return cls({commit_id: Node(seq, parent, merge) for commit_id, seq, parent, merge in rows.iterator()})

    def ancestors(self, commit_id: str) -> set[str]:
        """The commit and every commit it was made from, through both parents."""
        seen, stack = set(), [commit_id]
        while stack:
            current = stack.pop()
            if current is None or current in seen:
                continue
            seen.add(current)
            node = self.nodes[current]
            stack += [node.parent, node.merge_parent]
        return seen

    def merge_base(self, a: str, b: str) -> str | None:
        """The newest commit that both `a` and `b` were made from (commit sequence numbers follow the graph)."""
        common = self.ancestors(a) & self.ancestors(b)
        return max(common, key=lambda commit_id: self.nodes[commit_id].seq) if common else None

    def changes_since(self, head: str, base_history: set[str]) -> list[str]:
        """The commits on `head`'s first-parent chain that `base_history` does not hold, oldest first, without the
        merge commits that brought in only commits of `base_history`."""
        chain, current = [], head
        while current is not None and current not in base_history:
            node = self.nodes[current]
            if node.merge_parent is None or node.merge_parent not in base_history:
                chain.append(current)
            current = node.parent
        return chain[::-1]
