"""The merge queue's routes, included before catalog_app's: its `branches/<branch>` route takes any branch name with
slashes and would read `main/queue` as a branch."""

from django.urls import path

from merge_app.apis.queue import BranchQueueApi, MergeRequestQueueApi

urlpatterns = [
    path("catalogs/<str:catalog>/merge-requests/<int:number>/queue", MergeRequestQueueApi.as_view()),
    path("catalogs/<str:catalog>/branches/<path:branch>/queue", BranchQueueApi.as_view()),
]
