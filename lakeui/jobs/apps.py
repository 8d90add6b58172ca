from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "lakeui.jobs"
    label = "jobs"
    verbose_name = "Jobs"
