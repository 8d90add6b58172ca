"""Where a table's files live, and the filesystem to read them with.

Files are written under `<warehouse>/<base>/data/<tag>/` (segments) and `<warehouse>/<base>/deltas/<tag>/`
(delta files), where `base` is `<catalog id>/<table id>` and `tag` is unique per job run: never overwritten. The
catalog stores each file's path from `base` on; `Warehouse.uri` makes it a URI again.
"""

import os

import pyarrow.fs as pafs


class Warehouse:
    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")

    def uri(self, relative: str) -> str:
        return f"{self.root}/{relative}"


def arrow_filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """pyarrow's filesystem and path for a warehouse URI (Hadoop's s3a:// is pyarrow's s3://; plain paths are
    made absolute)."""
    if uri.startswith("s3a://"):
        uri = "s3://" + uri[len("s3a://") :]
    elif "://" not in uri and not uri.startswith("file:"):
        uri = os.path.abspath(uri)
    return pafs.FileSystem.from_uri(uri)


def path_remove(uri: str) -> None:
    """Remove a file or a folder with everything in it (no Spark needed); nothing there is not an error."""
    filesystem, path = arrow_filesystem(uri)
    found = filesystem.get_file_info(path)
    if found.type == pafs.FileType.Directory:
        filesystem.delete_dir(path)
    elif found.type == pafs.FileType.File:
        filesystem.delete_file(path)


def files_missing(warehouse: Warehouse, relatives: list[str]) -> list[str]:
    """Those of the files (paths from the warehouse root) that are not there."""
    if not relatives:
        return []
    filesystem, root = arrow_filesystem(warehouse.root)
    found = filesystem.get_file_info([f"{root}/{relative}" for relative in relatives])
    return [relative for relative, info in zip(relatives, found, strict=True) if info.type != pafs.FileType.File]


def data_folder(base: str, tag: str) -> str:
    """The folder (from the warehouse root) of the segments one job run writes."""
    return f"{base}/data/{tag}"


def delta_folder(base: str, tag: str) -> str:
    """The folder (from the warehouse root) of the delta files one job run writes, one `__segment=<id>` folder per
    segment they delete from."""
    return f"{base}/deltas/{tag}"
