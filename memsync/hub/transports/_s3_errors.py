"""The S3 error vocabulary of `memsync.hub.transports.s3`: the error codes it acts on, and
an exception's code and one-line message. Pure: imports neither boto3 nor botocore."""

from __future__ import annotations

_PRECONDITION = {"PreconditionFailed", "412"}
_NO_CONDITIONAL = {"NotImplemented", "501", "InvalidArgument", "InvalidRequest"}
_DENIED = {
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
    "403",
}


def _code(exc: BaseException | None) -> str:
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return ""
    error = response.get("Error") or {}
    code = error.get("Code") if isinstance(error, dict) else None
    if code:
        return str(code)
    status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    return str(status) if status else ""


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()).rstrip(" :.") or type(exc).__name__


def no_retry_after_timeout(caught_exception: object = None, **_: object) -> bool | None:
    """botocore's `needs-retry` hook, before its retry handler: False (no retry) after a
    connect or read timeout, None (let botocore decide) otherwise."""
    name = type(caught_exception).__name__
    return False if name in ("ConnectTimeoutError", "ReadTimeoutError") else None
