"""Temporary: the names services/data.py, services/loads.py and services/data_jobs.py import from here, kept
importable while those modules are restructured. Table data is `segments` (the plain values), `warehouse` (where
files live), `frames`, `reads`, `writes` and `types`; delete this module once those three import from there."""

from catalog_app.engine.frames import collected
from catalog_app.engine.reads import read_page, read_page_here, read_segments
from catalog_app.engine.segments import Column, WrittenFile, file_in_partitions, in_schema
from catalog_app.engine.types import json_value
from catalog_app.engine.warehouse import Warehouse
from catalog_app.engine.writes import write_deltas, write_segments

__all__ = [
    "Column",
    "Warehouse",
    "WrittenFile",
    "collected",
    "file_in_partitions",
    "in_schema",
    "json_value",
    "read_page",
    "read_page_here",
    "read_segments",
    "write_deltas",
    "write_segments",
]
