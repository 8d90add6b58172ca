"""LakeUI's Python client: `Client` over the HTTP API and the `lakeui` command line. No Django here."""

from lakeui_client.client import API_VERSION, Client
from lakeui_client.errors import ApiError, ConflictError, JobFailed, LakeUIError, NotFound, PermissionDenied

__all__ = [
    "API_VERSION",
    "ApiError",
    "Client",
    "ConflictError",
    "JobFailed",
    "LakeUIError",
    "NotFound",
    "PermissionDenied",
]
