"""Which merge request made a merge commit: asked of the app that keeps merge requests, registered from above.

Merge requests live in a layer above catalog_app (docs/architecture.md#layers), which never imports it. The app that
can read them registers a reader here at start-up (`merge_request_reader_register`), as job kinds and consistency
checks register themselves; with none registered, no merge commit names a request.
"""

from collections.abc import Callable, Iterable

# merge commit ids -> {commit id: merge request number} for those a merge request's merge made
MergeRequestReader = Callable[[list[str]], dict[str, int]]
_READERS: list[MergeRequestReader] = []


def merge_request_reader_register(reader: MergeRequestReader) -> MergeRequestReader:
    if reader not in _READERS:
        _READERS.append(reader)
    return reader


def merge_requests_of(commit_ids: Iterable[str]) -> dict[str, int]:
    """The merge request number of each of these commits a merge request's merge made (the rest left out)."""
    wanted = sorted(set(commit_ids))
    found: dict[str, int] = {}
    if wanted:
        for reader in _READERS:
            found |= reader(wanted)
    return found


# commit ids -> {commit id: what made it} for those a merge, a cherry-pick, a revert or a restore made: `kind`
# (merge | cherry_pick | revert | restore), and where they exist `merge_request`, `approved_by`, `checks`,
# `picked_from` (the commit a pick applied), `source`, `point` (a restore's); the blame's reader (docs/provenance.md)
CommitLinksReader = Callable[[list[str]], dict[str, dict]]
_LINK_READERS: list[CommitLinksReader] = []


def commit_links_reader_register(reader: CommitLinksReader) -> CommitLinksReader:
    if reader not in _LINK_READERS:
        _LINK_READERS.append(reader)
    return reader


def commit_links_of(commit_ids: Iterable[str]) -> dict[str, dict]:
    """What made each of these commits, of those a merge, pick, revert or restore made (the rest left out)."""
    wanted = sorted(set(commit_ids))
    found: dict[str, dict] = {}
    if wanted:
        for reader in _LINK_READERS:
            found |= reader(wanted)
    return found
