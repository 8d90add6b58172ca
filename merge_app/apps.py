from django.apps import AppConfig


class MergeAppConfig(AppConfig):
    name = "merge_app"
    verbose_name = "Merge"

    def ready(self) -> None:
        # Registers the merge job kinds, in web and worker processes alike, and the merge logs' consistency check.
        from catalog_app.selectors.blame import settled_reader_register
        from catalog_app.selectors.consistency import check_register
        from catalog_app.selectors.merge_links import commit_links_reader_register, merge_request_reader_register
        from merge_app import job_kinds  # noqa: F401
        from merge_app.selectors.merges import merge_logs_check, merge_request_numbers
        from merge_app.selectors.provenance import cells_settled, commit_links

        check_register(merge_logs_check)
        merge_request_reader_register(merge_request_numbers)  # the change feed names a merge commit's request
        commit_links_reader_register(commit_links)  # the blame names a merge's request, approvers and checks
        settled_reader_register(cells_settled)  # and the resolution that settled a cell, with who chose it
