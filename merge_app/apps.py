from django.apps import AppConfig


class MergeAppConfig(AppConfig):
    name = "merge_app"
    verbose_name = "Merge"

    def ready(self) -> None:
        # Registers the merge job kinds, in web and worker processes alike.
        from merge_app import jobs  # noqa: F401
