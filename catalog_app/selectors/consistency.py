"""The consistency check (`manage.py lakeui_check`): read-only, a list of findings, none when the catalog is sound.

It checks what the catalog's rows promise each other and the warehouse: refs point at commits, parents exist,
every file a live commit (a branch head or a tag) references is on disk with its recorded size, delete files
list positions inside their segment, merge commits have their merge log, and no live name is held twice.
"""

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from catalog_app.engine.reads import deleted_positions
from catalog_app.engine.warehouse import Warehouse, arrow_filesystem
from catalog_app.models import Branch, Catalog, Commit, DataFile, ObjectKind, Tag
from catalog_app.selectors.objects import objects_at
from catalog_app.selectors.refs import commit_chain
from catalog_app.selectors.table_files import tables_files

Check = Callable[[Catalog, Callable[[str, str], "Finding"]], Iterator["Finding"]]
CHECKS: list[Check] = []  # checks of what other apps keep (merge logs), added by their AppConfig.ready


def check_register(check: Check) -> Check:
    """Add a check of a catalog: it gets the catalog and `finding(kind, message)`, and yields findings."""
    CHECKS.append(check)
    return check


@dataclass(frozen=True)
class Finding:
    catalog: str
    kind: str
    message: str

    def __str__(self) -> str:
        return f"[{self.catalog}] {self.kind}: {self.message}"


def catalog_findings(*, warehouse: str, catalog: str | None = None) -> tuple[list[Finding], int]:
    """The findings over every catalog (or the one named) and how many catalogs were checked."""
    catalogs = Catalog.objects.order_by("name")
    if catalog is not None:
        catalogs = catalogs.filter(name=catalog)
    checked = list(catalogs)
    return [f for c in checked for f in _findings(c, Warehouse(warehouse))], len(checked)


def _findings(catalog: Catalog, warehouse: Warehouse) -> Iterator[Finding]:
    commit_ids = set(Commit.objects.filter(catalog=catalog).values_list("id", flat=True))

    def finding(kind: str, message: str) -> Finding:
        return Finding(catalog.name, kind, message)

    live: dict[str, str] = {}  # commit id -> the ref naming it
    for name, head_id in Branch.objects.filter(catalog=catalog).order_by("name").values_list("name", "head_id"):
        if head_id not in commit_ids:
            yield finding("dangling_ref", f"branch {name!r} points at {head_id}, which is not a commit of the catalog")
        else:
            live.setdefault(head_id, f"branch {name!r}")
    for name, commit_id in Tag.objects.filter(catalog=catalog).order_by("name").values_list("name", "commit_id"):
        if commit_id not in commit_ids:
            yield finding("dangling_ref", f"tag {name!r} points at {commit_id}, which is not a commit of the catalog")
        else:
            live.setdefault(commit_id, f"tag {name!r}")
    for commit_id, parent_id, merge_parent_id in Commit.objects.filter(catalog=catalog).values_list(
        "id", "parent_id", "merge_parent_id"
    ):
        for role, parent in (("parent", parent_id), ("merge parent", merge_parent_id)):
            if parent is not None and parent not in commit_ids:
                yield finding("missing_parent", f"commit {commit_id}'s {role} {parent} does not exist")
    for check in CHECKS:
        yield from check(catalog, finding)
    checked_files: set = set()
    for commit_id, ref in sorted(live.items(), key=lambda item: item[1]):
        chain = commit_chain(Commit.objects.get(id=commit_id))
        yield from _names(chain, ref, finding)
        tables = objects_at(chain, kind=ObjectKind.TABLE)
        for files in tables_files(chain, table_ids=[t.object_id for t in tables]).values():
            yield from _files(files, warehouse, ref, checked_files, finding)


def _names(chain, ref: str, finding) -> Iterator[Finding]:
    databases = list(objects_at(chain, kind=ObjectKind.DATABASE))
    for name, count in Counter(d.name for d in databases).items():
        if count > 1:
            yield finding("duplicate_name", f"{ref}: database {name!r} is held by {count} live objects")
    names = {d.object_id: d.name for d in databases}
    for kind in (ObjectKind.TABLE, ObjectKind.VIEW):
        held = Counter((o.parent_id, o.name) for o in objects_at(chain, kind=kind))
        for (parent_id, name), count in held.items():
            if count > 1:
                where = names.get(parent_id, parent_id)
                yield finding("duplicate_name", f"{ref}: {kind} {where}.{name} is held by {count} live objects")


def _files(files, warehouse: Warehouse, ref: str, checked: set, finding) -> Iterator[Finding]:
    for segment in files.segments:
        deltas = files.deltas.get(segment.id, [])
        for file in [segment, *deltas]:
            if file.id in checked:
                continue
            checked.add(file.id)
            yield from _on_disk(file, warehouse, ref, finding)
        for delta in deltas:
            try:
                positions = deleted_positions(warehouse, [delta.path])
            except (OSError, ValueError):  # pyarrow's ArrowInvalid is a ValueError
                continue  # missing or of another size: found above
            if len(positions) and (min(positions.to_pylist()) < 0 or max(positions.to_pylist()) >= segment.row_count):
                yield finding(
                    "delete_out_of_range",
                    f"{ref}: delete file {delta.path} lists positions outside segment {segment.path}'s "
                    f"{segment.row_count} rows",
                )


def _on_disk(file: DataFile, warehouse: Warehouse, ref: str, finding) -> Iterator[Finding]:
    filesystem, path = arrow_filesystem(warehouse.uri(file.path))
    info = filesystem.get_file_info(path)
    if info.type.name != "File":
        yield finding("missing_file", f"{ref}: {file.kind} {file.path} is not in the warehouse")
    elif info.size != file.size_bytes:
        yield finding(
            "size_mismatch",
            f"{ref}: {file.kind} {file.path} holds {info.size} bytes, the catalog says {file.size_bytes}",
        )
