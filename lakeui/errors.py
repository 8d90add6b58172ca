"""The one exception type that services raise. The API maps it to `{code, message, details}` with its status."""

from typing import Any


class ApplicationError(Exception):
    """A refusal the user can act on: a stable machine-readable code, a sentence, and optional details."""

    status = 400

    def __init__(self, code: str, message: str, *, status: int | None = None, details: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details
        if status is not None:
            self.status = status

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


class NotFoundError(ApplicationError):
    status = 404


class ConflictError(ApplicationError):
    status = 409
