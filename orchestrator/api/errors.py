"""Every error the API answers is JSON `{success: false, error: "<one sentence>"}`.

Handlers turn Starlette's own 404/405, the API's `ApiError` and anything unexpected
into that shape; an unexpected error is logged with its traceback and answered 500
with a sentence only, so no stack trace or path reaches the client. A client that
hangs up before its body is in is no failure of the server: one WARNING line.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import orjson
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

log = logging.getLogger("goldenloop.api")


class ApiError(Exception):
    """An answer other than success: a status and the sentence that explains it."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})


class JsonBody(Response):
    """JSON written by orjson: faster than the standard library, and it knows datetimes."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def error_response(status: int, message: str, headers: Mapping[str, str] | None = None) -> JsonBody:
    return JsonBody({"success": False, "error": message}, status_code=status, headers=dict(headers or {}))


async def on_api_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.message, exc.headers)


async def on_http_error(request: Request, exc: Exception) -> Response:
    """Starlette's routing errors (404, 405), worded like the rest."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"there is no route {request.url.path}; GET /openapi.json lists them"
    elif exc.status_code == 405:
        allowed = (exc.headers or {}).get("Allow", "")
        message = f"{request.method} is not allowed on {request.url.path}; allowed: {allowed or 'none'}"
    else:
        message = str(exc.detail)
    return error_response(exc.status_code, message, exc.headers)


async def on_client_gone(request: Request, _exc: Exception) -> Response:
    client = f"{request.client.host}:{request.client.port}" if request.client else "a client"
    log.warning("%s closed the connection before the body of its %s %s was in; nothing was done",
                client, request.method, request.url.path)
    return error_response(400, "the connection closed before the whole request body arrived")  # read by nobody


async def on_unexpected(request: Request, exc: Exception) -> Response:
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return error_response(500, "the server failed to answer this request; its log has the details")


HANDLERS = {ApiError: on_api_error, HTTPException: on_http_error, ClientDisconnect: on_client_gone,
            Exception: on_unexpected}
