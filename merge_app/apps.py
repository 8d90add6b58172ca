from django.apps import AppConfig


class MergeAppConfig(AppConfig):
    name = "merge_app"
    verbose_name = "Merge"
