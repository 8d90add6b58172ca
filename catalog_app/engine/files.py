"""Listing and deleting warehouse files through Hadoop's FileSystem, so it works for local paths and URIs alike."""

from collections.abc import Iterator
from dataclasses import dataclass

from pyspark.sql import SparkSession


@dataclass(frozen=True)
class StoredFile:
    uri: str
    modified_ms: int
    size: int


def _filesystem(spark: SparkSession, uri: str):
    path = spark._jvm.org.apache.hadoop.fs.Path(uri)
    return path, path.getFileSystem(spark._jsc.hadoopConfiguration())


def list_files(spark: SparkSession, uri: str) -> Iterator[StoredFile]:
    path, filesystem = _filesystem(spark, uri)
    if not filesystem.exists(path):
        return
    files = filesystem.listFiles(path, True)
    while files.hasNext():
        status = files.next()
        yield StoredFile(status.getPath().toString(), status.getModificationTime(), status.getLen())


def delete_file(spark: SparkSession, uri: str) -> bool:
    path, filesystem = _filesystem(spark, uri)
    return bool(filesystem.delete(path, False))


def delete_folder(spark: SparkSession, uri: str) -> bool:
    """Remove a folder and everything in it; False if there was none."""
    path, filesystem = _filesystem(spark, uri)
    return bool(filesystem.delete(path, True))
