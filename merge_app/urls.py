from django.urls import path

from merge_app.apis.commits import CommitDetailApi
from merge_app.apis.merge_requests import (
    MergeRequestChecksApi,
    MergeRequestDetailApi,
    MergeRequestListApi,
    MergeRequestMergeApi,
    MergeRequestResolutionApi,
    MergeRequestReviewApi,
)
from merge_app.apis.merges import (
    CherryPickListApi,
    DiffApi,
    DiffKeysApi,
    DiffRowsApi,
    MergeDetailApi,
    MergeListApi,
    RestoreDetailApi,
    RestoreListApi,
    RevertListApi,
)
from merge_app.apis.sql import SqlApi

urlpatterns = [
    path("catalogs/<str:catalog>/sql", SqlApi.as_view()),
    path("catalogs/<str:catalog>/commits/<str:commit_id>", CommitDetailApi.as_view()),
    path("catalogs/<str:catalog>/diff", DiffApi.as_view()),
    path("catalogs/<str:catalog>/diff/keys", DiffKeysApi.as_view()),
    path("catalogs/<str:catalog>/diff/rows", DiffRowsApi.as_view()),
    path("catalogs/<str:catalog>/merges", MergeListApi.as_view()),
    path("catalogs/<str:catalog>/merges/<uuid:merge_id>", MergeDetailApi.as_view()),
    path("catalogs/<str:catalog>/merge-requests", MergeRequestListApi.as_view()),
    path("catalogs/<str:catalog>/merge-requests/<int:number>", MergeRequestDetailApi.as_view()),
    path("catalogs/<str:catalog>/merge-requests/<int:number>/reviews", MergeRequestReviewApi.as_view()),
    path("catalogs/<str:catalog>/merge-requests/<int:number>/merge", MergeRequestMergeApi.as_view()),
    path("catalogs/<str:catalog>/merge-requests/<int:number>/resolution", MergeRequestResolutionApi.as_view()),
    path("catalogs/<str:catalog>/merge-requests/<int:number>/checks", MergeRequestChecksApi.as_view()),
    path("catalogs/<str:catalog>/reverts", RevertListApi.as_view()),
    path("catalogs/<str:catalog>/cherry-picks", CherryPickListApi.as_view()),
    path("catalogs/<str:catalog>/restores", RestoreListApi.as_view()),
    path("catalogs/<str:catalog>/restores/<uuid:restore_id>", RestoreDetailApi.as_view()),
]
