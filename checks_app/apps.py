from django.apps import AppConfig


class ChecksAppConfig(AppConfig):
    name = "checks_app"
    verbose_name = "Merge checks"

    def ready(self) -> None:
        from checks_app import job_kinds  # noqa: F401  (registers the check job kinds)
