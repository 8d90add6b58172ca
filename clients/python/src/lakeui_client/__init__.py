"""LakeUI's Python client: `Client` over the HTTP API and the `lakeui` command line. No Django here."""

from lakeui_client.client import API_VERSION, Client, webhook_signature_valid
from lakeui_client.errors import (
    ApiError,
    ConflictError,
    JobConflict,
    JobFailed,
    JobNotFound,
    JobPermissionDenied,
    LakeUIError,
    NotFound,
    PermissionDenied,
    VersionMismatch,
    VersionWarning,
)

__all__ = [
    "API_VERSION",
    "ApiError",
    "Client",
    "ConflictError",
    "JobConflict",
    "JobFailed",
    "JobNotFound",
    "JobPermissionDenied",
    "LakeUIError",
    "NotFound",
    "PermissionDenied",
    "VersionMismatch",
    "VersionWarning",
    "webhook_signature_valid",
]
