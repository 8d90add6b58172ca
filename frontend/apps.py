from django.apps import AppConfig


class FrontendConfig(AppConfig):
    name = "frontend"

    def ready(self) -> None:
        # The change feed (catalog_app) names the merge request of a merge commit through merge_app's selectors.
        from catalog_app.selectors.merge_links import merge_request_reader_register
        from frontend.merge_links import merge_request_numbers

        merge_request_reader_register(merge_request_numbers)
