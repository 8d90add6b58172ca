from django.urls import path

from catalog_app.apis.health import HealthApi
from catalog_app.apis.jobs import JobCancelApi, JobDetailApi, JobListApi

urlpatterns = [
    path("health", HealthApi.as_view(), name="health"),
    path("jobs", JobListApi.as_view(), name="job-list"),
    path("jobs/<uuid:job_id>", JobDetailApi.as_view(), name="job-detail"),
    path("jobs/<uuid:job_id>/cancel", JobCancelApi.as_view(), name="job-cancel"),
]
