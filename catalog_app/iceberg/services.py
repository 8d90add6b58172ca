"""The Iceberg metadata of a table at a ref: written into the warehouse once per table state (the table's newest
commit on the ref is the key, so a table changed since is never served stale) and read back after that."""

from dataclasses import dataclass

from django.conf import settings

from catalog_app.engine.iceberg_metadata import (
    NotRepresentable,
    metadata_path,
    metadata_read,
    table_metadata_write,
    table_uri,
)
from catalog_app.engine.warehouse import Warehouse
from catalog_app.iceberg.selectors import table_commits, table_key
from catalog_app.models import ObjectVersion
from catalog_app.selectors.refs import Chain
from lakeui.errors import ApplicationError

MESSAGE_NOT_REPRESENTABLE = "Table {name!r} cannot be served as Iceberg: {reason}"
_KEPT: dict[str, "LoadedTable"] = {}  # by table and head: a state's metadata never changes once written
KEPT_MAX = 64


@dataclass(frozen=True)
class LoadedTable:
    location: str
    metadata_json: bytes  # the metadata.json as written: served as it is


def iceberg_table_load(chain: Chain, *, table: ObjectVersion, changed: bool = False) -> LoadedTable:
    """The table's Iceberg metadata at `chain`. Its key is the table's newest commit on the chain: a repeat costs one
    query (and a file read in a process that has not read that state yet); a new state writes only what changed
    (engine/iceberg_metadata.py). `changed`: the chain's commit changed the table (a commit's answer), so that is
    its newest.
    Refused (406) when Iceberg readers could not read the table as LakeUI does."""
    warehouse = Warehouse(settings.LAKEUI_WAREHOUSE)
    base = f"{table.catalog_id}/{table.object_id}"
    # retention changed which snapshots are served when `expired` rose (docs/retention.md)
    seq, head_commit, expired = table_key(chain, table_id=table.object_id, changed=changed)
    name = f"{head_commit}-x{expired}" if expired else head_commit
    key = f"{base}@{seq}@{expired}"
    loaded = _KEPT.get(key)
    if loaded is not None:
        return loaded
    content = metadata_read(warehouse, base, name)
    if content is not None:
        loaded = LoadedTable(location=table_uri(warehouse, metadata_path(base, name)), metadata_json=content)
    else:
        commits = [c for c in table_commits(chain, table_id=table.object_id) if c.seq <= seq]
        try:
            written = table_metadata_write(warehouse, base, str(table.object_id), commits, key=name)
        except NotRepresentable as refusal:
            message = MESSAGE_NOT_REPRESENTABLE.format(name=table.name, reason=refusal)
            raise ApplicationError("iceberg_not_representable", message, status=406) from None
        loaded = LoadedTable(location=written.location, metadata_json=written.metadata_json)
    if len(_KEPT) >= KEPT_MAX:
        _KEPT.pop(next(iter(_KEPT)))
    _KEPT[key] = loaded
    return loaded
