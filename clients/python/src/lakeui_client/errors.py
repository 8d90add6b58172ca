"""Typed exceptions: every API refusal carries the API's `code`, `message` and `details`."""

from typing import Any


class LakeUIError(Exception):
    """Base of every error this client raises."""


class ApiError(LakeUIError):
    """LakeUI refused a request; `status` is the HTTP status, `code` the API's stable code."""

    def __init__(self, code: str, message: str, *, status: int | None = None, details: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.details = details


class NotFound(ApiError):
    pass


class PermissionDenied(ApiError):
    pass


class ConflictError(ApiError):
    pass


class JobFailed(ApiError):
    """A job ended failed or cancelled; `job` is its last state."""

    def __init__(self, job: dict) -> None:
        super().__init__(
            job.get("error_code") or job.get("status", "failed"),
            job.get("error_message") or f"job {job.get('id')} {job.get('status')}",
            details=(job.get("result") or {}).get("details") if isinstance(job.get("result"), dict) else None,
        )
        self.job = job


class VersionMismatch(LakeUIError):
    pass


def from_response(status: int, body: Any) -> ApiError:
    if isinstance(body, dict) and "code" in body:
        code, message, details = body["code"], body.get("message", ""), body.get("details")
    else:
        code, message, details = f"http_{status}", str(body)[:500], None
    cls = {401: PermissionDenied, 403: PermissionDenied, 404: NotFound, 409: ConflictError}.get(status, ApiError)
    return cls(code, message, status=status, details=details)
