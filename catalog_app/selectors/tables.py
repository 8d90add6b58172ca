"""A table's data at a commit: its live segments and delta files."""

import uuid
from dataclasses import dataclass

from catalog_app.engine.tables import Column, SegmentRead
from catalog_app.models import DataFile, FileEntry, ObjectVersion
from catalog_app.selectors.objects import newest_on_chain
from catalog_app.selectors.refs import Chain


@dataclass(frozen=True)
class TableFiles:
    segments: list[DataFile]  # in the order they became live
    deltas: dict[uuid.UUID, list[DataFile]]  # by segment id

    def reads(self) -> list[SegmentRead]:
        """What the engine needs to read the table: each segment with its written schema and live deltas."""
        return [
            SegmentRead(
                id=str(segment.id),
                path=segment.path,
                columns=tuple(Column.from_dict(c) for c in segment.schema_version.columns),
                deltas=tuple(delta.path for delta in self.deltas.get(segment.id, [])),
                order=position,
            )
            for position, segment in enumerate(self.segments)
        ]


def table_files(chain: Chain, *, table_id: uuid.UUID) -> TableFiles:
    entries = (
        newest_on_chain(FileEntry.objects.filter(table_id=table_id), chain, key="file_id")
        .filter(removed=False)
        .select_related("file", "file__schema_version")
        .order_by("seq", "id")
    )
    segments, deltas = [], {}
    for entry in entries:
        if entry.file.kind == DataFile.Kind.SEGMENT:
            segments.append(entry.file)
        else:
            deltas.setdefault(entry.file.segment_id, []).append(entry.file)
    return TableFiles(segments=segments, deltas=deltas)


def table_has_rows(chain: Chain, *, table_id: uuid.UUID) -> bool:
    """Whether the table may hold rows. Exact unless a segment has overlapping delta files, where it may say
    True for an empty segment: the safe side for the checks that use it (NOT NULL without a default)."""
    files = table_files(chain, table_id=table_id)
    return any(
        segment.row_count > max((delta.row_count for delta in files.deltas.get(segment.id, [])), default=0)
        for segment in files.segments
    )


def table_columns(table: ObjectVersion) -> list[Column]:
    return [Column.from_dict(column) for column in table.state["columns"]]
