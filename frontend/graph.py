"""The branch graph of a catalog as inline SVG geometry: one row per commit (newest first), one lane per branch
line, edges to the first parent and (dashed) to the merged source head, and the refs that point at each commit.

Pure layout: it takes commits, branches and tags already read and returns plain dataclasses the template draws.
"""

from dataclasses import dataclass, field

from catalog_app.models import Branch, Commit, Tag

ROW = 28  # px between commits
LANE = 18  # px between lanes
PAD = 12
PALETTE = ("#0b5cad", "#b35c00", "#2e7d32", "#8e24aa", "#c62828", "#00838f", "#6d4c41", "#546e7a")
MAX_COMMITS = 200


@dataclass
class Node:
    commit: Commit
    x: int
    y: int
    color: str
    branches: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)

    @property
    def is_merge(self) -> bool:
        return self.commit.merge_parent_id is not None


@dataclass(frozen=True)
class Edge:
    path: str
    color: str
    merge: bool


@dataclass
class Graph:
    nodes: list[Node]
    edges: list[Edge]
    width: int
    height: int
    lanes: list[tuple[str, str]]  # (label, color) per lane
    truncated: bool

    @property
    def text_x(self) -> int:
        return self.width + 8


def graph_layout(commits: list[Commit], branches: list[Branch], tags: list[Tag]) -> Graph:
    """`commits` newest first (by seq), each with `line` selected (its `branch` gives the lane's name)."""
    truncated = len(commits) > MAX_COMMITS
    commits = commits[:MAX_COMMITS]
    lanes: dict[object, int] = {}
    labels: list[tuple[str, str]] = []
    for commit in reversed(commits):  # oldest first: the default branch's line takes lane 0
        key = commit.line.branch_id or f"line-{commit.line_id}"
        if key not in lanes:
            lanes[key] = len(lanes)
            name = commit.line.branch.name if commit.line.branch_id else f"line {commit.line_id}"
            labels.append((name, PALETTE[lanes[key] % len(PALETTE)]))
    heads: dict[str, list[str]] = {}
    for branch in branches:
        heads.setdefault(branch.head_id, []).append(branch.name)
    tagged: dict[str, list[str]] = {}
    for tag in tags:
        tagged.setdefault(tag.commit_id, []).append(tag.name)
    nodes: dict[str, Node] = {}
    for row, commit in enumerate(commits):
        lane = lanes[commit.line.branch_id or f"line-{commit.line_id}"]
        nodes[commit.id] = Node(
            commit=commit, x=PAD + lane * LANE, y=PAD + row * ROW, color=PALETTE[lane % len(PALETTE)],
            branches=heads.get(commit.id, []), tags=tagged.get(commit.id, []),
        )  # fmt: skip
    edges = []
    for node in nodes.values():
        for parent_id, merge in ((node.commit.parent_id, False), (node.commit.merge_parent_id, True)):
            parent = nodes.get(parent_id) if parent_id else None
            if parent is None:
                continue
            color = parent.color if merge else node.color
            edges.append(Edge(path=_curve(node, parent, bend_at_child=merge), color=color, merge=merge))
    width = PAD * 2 + max(len(lanes) - 1, 0) * LANE
    height = PAD * 2 + max(len(commits) - 1, 0) * ROW
    return Graph(nodes=list(nodes.values()), edges=edges, width=width, height=height, lanes=labels, truncated=truncated)


def _curve(child: Node, parent: Node, *, bend_at_child: bool) -> str:
    """Straight down within a lane. Across lanes a fork runs down its own lane and bends into the parent's just
    above the fork point; a merge edge bends out of the merge commit at once and runs down the source's lane."""
    if child.x == parent.x:
        return f"M{child.x},{child.y} L{parent.x},{parent.y}"
    if bend_at_child:
        mid, end = child.y + ROW // 2, child.y + ROW
        return f"M{child.x},{child.y} C{child.x},{mid} {parent.x},{mid} {parent.x},{end} L{parent.x},{parent.y}"
    start, mid = parent.y - ROW, parent.y - ROW // 2
    return f"M{child.x},{child.y} L{child.x},{start} C{child.x},{mid} {parent.x},{mid} {parent.x},{parent.y}"
