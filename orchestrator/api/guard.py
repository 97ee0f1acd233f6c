"""What stands between a request and the disk: web pages, the token, the roots and the body.

- `BrowserGate`: a browser sends a page's cross-site `text/plain` POST without asking
  first, and a page under a name made to resolve to 127.0.0.1 (DNS rebinding) can even
  read the answers. So an `Origin` must be a loopback one (403 otherwise), and a server
  without a token, which is loopback-only, also wants a loopback `Host`. Requests
  without `Origin` (curl, scripts, agents) pass; POST also needs a JSON Content-Type
  (`require_json`, 415), which no page can send cross-site unasked.
- `TokenGate`: with a token set, every request but `/api/health` needs
  `Authorization: Bearer <token>`, compared in constant time (`hmac.compare_digest`).
- `project_folder`: a `projectPath` is resolved (symlinks followed) and must lie inside a
  root before anything in it is read or written; below it, the history store follows no
  link at all (`reflection.reflect_history`).
- `read_body`: the body is read chunk by chunk and refused with 413 as soon as it
  passes the limit; a declared Content-Length over the limit is refused before reading.
  A body not whole within the read timeout is answered 408: a short one (a
  Content-Length larger than what comes) would otherwise hold its connection forever.
- `LingeringClose`: an answer given before the body was read (401, 403, 413, 415) would reach
  the client only by luck if the connection closed at once, because the unread bytes
  make the kernel reset it. So the answer is sent, then at most `DRAIN_BYTES` more of
  the body (or `DRAIN_S` seconds of it) are read and dropped, then the connection
  closes: never the whole of a huge or lying body.
"""

from __future__ import annotations

import functools
import hmac
import os
from pathlib import Path
from urllib.parse import urlsplit

import anyio
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from orchestrator.api.errors import ApiError, error_response
from orchestrator.api.settings import is_loopback

OPEN_PATHS = frozenset({"/api/health"})
DRAIN_BYTES = 1 << 20
DRAIN_S = 2.0


class BrowserGate:
    """ASGI middleware: 403 for what a web page of another site may have sent."""

    def __init__(self, app: ASGIApp, loopback_host: bool) -> None:
        self.app = app
        self.loopback_host = loopback_host

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        problem = self._problem(Headers(scope=scope)) if scope["type"] == "http" else None
        if problem is None:
            await self.app(scope, receive, send)
            return
        await error_response(403, problem)(scope, receive, send)

    def _problem(self, headers: Headers) -> str | None:
        origin = headers.get("origin")
        if origin is not None and not _loopback_url(origin):
            return f"this server answers no web page of another site (Origin: {origin[:100]})"
        host = headers.get("host")
        if self.loopback_host and host is not None and not _loopback_url(f"//{host}"):
            return ("without GOLDENLOOP_API_TOKEN this server answers only requests addressed to "
                    f"localhost, 127.0.0.1 or [::1], not {host[:100]}")
        return None


@functools.lru_cache(maxsize=256)  # a client sends the same Host each time: parse it once
def _loopback_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:  # a broken [IPv6] literal
        return False
    host = parts.hostname
    return parts.scheme in ("", "http", "https") and host is not None and is_loopback(host)


def require_json(request: Request) -> None:
    """415 unless the body is declared JSON: a page's cross-site form or `text/plain` fetch is not."""
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media != "application/json":
        raise ApiError(415, f"the body must be sent as Content-Type: application/json, not {media or 'untyped'}")


class TokenGate:
    """ASGI middleware: 401 unless the bearer token matches (when one is set)."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token.encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.token is None or scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        problem = self._problem(Headers(scope=scope).get("authorization"))
        if problem is None:
            await self.app(scope, receive, send)
            return
        response = error_response(401, problem, {"WWW-Authenticate": "Bearer"})
        await response(scope, receive, send)

    def _problem(self, header: str | None) -> str | None:
        assert self.token is not None
        if not header:
            return "this server needs an Authorization: Bearer <token> header"
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer":
            return f"this server needs an Authorization: Bearer <token> header, not a {scheme[:20]} one"
        if not hmac.compare_digest(given.strip().encode(), self.token):
            return "the bearer token is wrong"
        return None


def project_folder(raw: str, roots: tuple[Path, ...]) -> Path:
    """The project folder a request names, checked against the roots (403) and the disk (404):
    a repository's top folder, never its `.git` or a folder inside its working tree (403),
    where the memory's files would be the repository's untracked files; a folder of no
    repository may be a project too."""
    if "\x00" in raw:
        raise ApiError(400, "projectPath must not contain a NUL character")
    if not Path(raw).is_absolute():
        raise ApiError(400, "projectPath must be an absolute path")
    # `..` and every symlink on the way, before any other access. A symlink loop is left
    # in, and is then no folder (404): Path.resolve would stat once more only to raise.
    folder = Path(os.path.realpath(raw))
    if not any(folder.is_relative_to(root) for root in roots):
        raise ApiError(403, "projectPath is outside the folders this server may use (its --root folders)")
    if not folder.is_dir():
        raise ApiError(404, "projectPath names no folder on this machine")
    if ".git" in folder.parts:
        raise ApiError(403, "projectPath is inside a repository's .git folder; name the repository's top folder")
    top = next((above for above in folder.parents if (above / ".git").exists()), None)
    if top is not None and not (folder / ".git").exists():
        raise ApiError(403, f"projectPath is a folder inside the repository {top}; name its top folder, where "
                       "goldenloop keeps the project's memory")
    return folder


async def read_body(request: Request, limit: int, timeout_s: float) -> bytes:
    """The whole body within `timeout_s` seconds (408), or 413 as soon as it is known to be
    larger than `limit` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise ApiError(400, "the Content-Length header is not a number")
        if int(declared) > limit:
            raise _too_large(limit)
    chunks, size = [], 0
    try:
        with anyio.fail_after(timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise _too_large(limit)
                chunks.append(chunk)
    except TimeoutError:
        raise ApiError(408, f"the request body did not arrive whole within {timeout_s:g} seconds") from None
    return b"".join(chunks)


def _too_large(limit: int) -> ApiError:
    return ApiError(413, f"the request body is larger than this server's limit of {limit} bytes")


class LingeringClose:
    """ASGI middleware: an early answer is delivered before its connection closes."""

    def __init__(self, app: ASGIApp, drain_bytes: int = DRAIN_BYTES, drain_s: float = DRAIN_S) -> None:
        self.app = app
        self.drain_bytes = drain_bytes
        self.drain_s = drain_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body_done = False

        async def tracked_receive() -> Message:
            nonlocal body_done
            message = await receive()
            body_done = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        async def lingering_send(message: Message) -> None:
            if body_done:
                await send(message)
            elif message["type"] == "http.response.start":  # no reuse of a half-read connection
                await send({**message, "headers": [*message.get("headers", []), (b"connection", b"close")]})
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                await send({**message, "more_body": True})  # the whole answer is out...
                await self._drain(receive)  # ...while what the client still sends is dropped
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            else:
                await send(message)

        await self.app(scope, tracked_receive, lingering_send)

    async def _drain(self, receive: Receive) -> None:
        dropped = 0
        with anyio.move_on_after(self.drain_s):
            while dropped <= self.drain_bytes:
                message = await receive()
                if message["type"] != "http.request" or not message.get("more_body", False):
                    return
                dropped += len(message.get("body", b""))
