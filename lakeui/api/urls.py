from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView

from lakeui.api.views import NotFoundApi

urlpatterns = [
    path("schema", SpectacularAPIView.as_view(), name="api-schema"),
    path("", include("lakeui.jobs.urls")),
    path("", include("merge_app.urls_queue")),  # before catalog_app: its branches/<path> route
    path("", include("catalog_app.urls")),
    path("", include("merge_app.urls")),
    path("", include("checks_app.urls")),
    path("", include("hooks_app.urls")),
    re_path(r"^.*$", NotFoundApi.as_view()),
]
