from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularSwaggerView

from lakeui.api.views import NotFoundApi

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("lakeui.api.urls")),
    path("api/docs", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    re_path(r"^api/.*$", NotFoundApi.as_view()),
    path("iceberg/", include("catalog_app.urls_iceberg")),  # the Iceberg REST catalog
    path("", include("frontend.urls")),
]
handler500 = "lakeui.api.views.server_error"
