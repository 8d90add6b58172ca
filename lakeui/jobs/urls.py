from django.urls import path

from lakeui.jobs.apis import HealthApi, HealthDeepApi, JobCancelApi, JobDetailApi, JobListApi

urlpatterns = [
    path("health", HealthApi.as_view(), name="health"),
    path("health/deep", HealthDeepApi.as_view(), name="health-deep"),
    path("jobs", JobListApi.as_view(), name="job-list"),
    path("jobs/<uuid:job_id>", JobDetailApi.as_view(), name="job-detail"),
    path("jobs/<uuid:job_id>/cancel", JobCancelApi.as_view(), name="job-cancel"),
]
