"""The Iceberg REST catalog's paths, under `/iceberg/` (lakeui/urls.py): `{catalog}/{ref}/v1/...`, where the ref
(a branch, a tag or a commit id) may hold '/' (sent percent-encoded; it matches lazily up to `/v1/`)."""

from django.urls import re_path

from catalog_app.apis import iceberg

ROOT = r"^(?P<catalog>[A-Za-z0-9_]{1,63})/(?P<ref>[A-Za-z0-9_][A-Za-z0-9_./-]*?)/v1/"
NAMESPACE = ROOT + r"namespaces/(?P<namespace>[^/]+)"

urlpatterns = [
    re_path(ROOT + r"config$", iceberg.IcebergConfigApi.as_view()),
    re_path(ROOT + r"namespaces$", iceberg.IcebergNamespaceListApi.as_view()),
    re_path(NAMESPACE + r"$", iceberg.IcebergNamespaceDetailApi.as_view()),
    re_path(NAMESPACE + r"/tables$", iceberg.IcebergTableListApi.as_view()),
    re_path(NAMESPACE + r"/tables/(?P<table>[^/]+)$", iceberg.IcebergTableLoadApi.as_view()),
    re_path(NAMESPACE + r"/register$", iceberg.IcebergTableRegisterApi.as_view()),
    re_path(ROOT + r"tables/rename$", iceberg.IcebergTableRenameApi.as_view()),
    re_path(ROOT + r"transactions/commit$", iceberg.IcebergTransactionCommitApi.as_view()),
    re_path(ROOT + r"events$", iceberg.IcebergEventsApi.as_view()),
    re_path(ROOT + r".*$", iceberg.IcebergUnsupportedApi.as_view()),
    re_path(r"^.*$", iceberg.IcebergNotFoundApi.as_view()),
]
