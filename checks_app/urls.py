from django.urls import path

from checks_app.apis import CheckDetailApi, CheckListApi, CheckRunDetailApi, CheckRunListApi

urlpatterns = [
    path("catalogs/<str:catalog>/checks", CheckListApi.as_view()),
    path("catalogs/<str:catalog>/checks/<int:check_id>", CheckDetailApi.as_view()),
    path("catalogs/<str:catalog>/checks/<int:check_id>/runs", CheckRunListApi.as_view()),
    path("catalogs/<str:catalog>/check-runs/<uuid:run_id>", CheckRunDetailApi.as_view()),
]
