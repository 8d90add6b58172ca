"""The Celery app. Every setting lives in Django settings under the CELERY_ namespace."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "lakeui.settings.local")

app = Celery("lakeui")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
