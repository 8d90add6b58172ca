"""Typed exceptions: every API refusal carries the API's `code`, `message` and `details`.

A job that fails is refused like a request: its HTTP status (a merge conflict is a 409, a protected branch a
403) picks the same class a synchronous refusal would get, so `except ConflictError` catches both."""

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
    """A job ended failed or cancelled; `job` is its last state, `details` what the job's refusal carried."""

    def __init__(self, job: dict) -> None:
        super().__init__(
            job.get("error_code") or job.get("status", "failed"),
            job.get("error_message") or f"job {job.get('id')} {job.get('status')}",
            status=job.get("error_status"),
            details=job.get("result"),  # a failed job keeps its refusal's details as its result
        )
        self.job = job


class JobNotFound(JobFailed, NotFound):
    pass


class JobPermissionDenied(JobFailed, PermissionDenied):
    pass


class JobConflict(JobFailed, ConflictError):
    pass


class VersionMismatch(LakeUIError):
    """The server speaks an API major version this client does not (its paths or answers differ)."""


class VersionWarning(UserWarning):
    """The server's API is of this client's major version but an older or newer minor one."""


BY_STATUS = {401: PermissionDenied, 403: PermissionDenied, 404: NotFound, 409: ConflictError}
JOB_BY_STATUS = {401: JobPermissionDenied, 403: JobPermissionDenied, 404: JobNotFound, 409: JobConflict}


def from_response(status: int, body: Any) -> ApiError:
    if isinstance(body, dict) and "code" in body:
        code, message, details = body["code"], body.get("message", ""), body.get("details")
    else:
        code, message, details = f"http_{status}", str(body)[:500], None
    return BY_STATUS.get(status, ApiError)(code, message, status=status, details=details)


def from_job(job: dict) -> JobFailed:
    return JOB_BY_STATUS.get(job.get("error_status"), JobFailed)(job)
