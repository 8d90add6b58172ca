"""Garbage collection of a catalog's folder in the warehouse: the files no commit references, once old enough."""

from collections.abc import Collection
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from catalog_app.engine import files
from catalog_app.engine.iceberg_metadata import FOLDER as ICEBERG_FOLDER
from catalog_app.engine.warehouse import Warehouse


@dataclass
class Collected:
    removed: list[str] = field(default_factory=list)  # paths from the warehouse root
    removed_bytes: int = 0
    kept: int = 0


def unreferenced_remove(
    spark: SparkSession, warehouse: Warehouse, folder: str, *, referenced: Collection[str], cutoff_ms: float
) -> Collected:
    """Remove the files under `folder` (a catalog's, from the warehouse root) whose path is not in `referenced`
    and that were last modified before `cutoff_ms` (ms since the epoch). A file's hidden companion
    (`.<name>.crc`) goes with the file it belongs to. A table's Iceberg metadata (`<table>/iceberg/`, written once per
    table state and reused by later states, engine/iceberg_metadata.py) is no commit's file and is kept: a manifest
    an old state wrote is part of every later state's metadata."""
    prefix = f"{folder}/"
    collected = Collected()
    for stored in list(files.list_files(spark, warehouse.uri(folder))):
        relative = prefix + stored.uri.split(prefix, 1)[1]
        owner = relative.rsplit("/", 1)[0] + "/" + relative.rsplit("/", 1)[1].removeprefix(".").removesuffix(".crc")
        in_iceberg = relative[len(prefix) :].split("/")[1:2] == [ICEBERG_FOLDER]
        if relative in referenced or owner in referenced or stored.modified_ms > cutoff_ms or in_iceberg:
            collected.kept += 1
            continue
        if files.delete_file(spark, stored.uri):
            collected.removed.append(relative)
            collected.removed_bytes += stored.size
    return collected
