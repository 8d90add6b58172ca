from django.apps import AppConfig


class CatalogAppConfig(AppConfig):
    name = "catalog_app"
    verbose_name = "Catalog"

    def ready(self) -> None:
        # Registers the production job kinds with the registry, in web and worker processes alike.
        from catalog_app import job_kinds  # noqa: F401
