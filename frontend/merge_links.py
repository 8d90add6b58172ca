"""The merge request of a merge commit, for catalog_app's change feed (catalog_app.selectors.merge_links): read
through merge_app's selectors and registered at start-up (FrontendConfig.ready), since catalog_app may not import
merge_app. It belongs in merge_app's own AppConfig.ready beside its other registrations."""

from merge_app.selectors.merges import merge_of_commit


def merge_request_numbers(commit_ids: list[str]) -> dict[str, int]:
    found = {}
    for commit_id in commit_ids:
        merge = merge_of_commit(commit=commit_id)
        request = getattr(merge, "merge_request", None) if merge is not None else None
        if request is not None:
            found[commit_id] = request.number
    return found
