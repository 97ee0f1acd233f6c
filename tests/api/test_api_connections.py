"""Connections that go wrong: a client that stops sending is cut off, one that hangs up
is one log line."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import pytest
from anyio.abc import SocketStream
from apikit import REFLECT, Serve

from orchestrator.api.app import create_app
from orchestrator.api.settings import ApiSettings

pytestmark = pytest.mark.anyio

HEADERS = b"POST /api/skills/reflect HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


async def _until_closed(stream: SocketStream) -> bytes:
    """What the server sends before it closes the connection; 30 s only bound a failure."""
    received = b""
    with anyio.fail_after(30):
        while True:
            try:
                received += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return received


async def _trickle(stream: SocketStream) -> None:
    """Headers a byte at a time, for as long as the server listens: no byte buys more time."""
    with anyio.fail_after(30):
        for byte in HEADERS + b"X-Slow: " + b"a" * 10_000:
            try:
                await stream.send(bytes([byte]))
            except (anyio.BrokenResourceError, ConnectionError):
                return
            await anyio.sleep(0.05)


async def test_a_client_that_stops_sending_is_cut_off(serve: Serve) -> None:
    async with serve(read_timeout=0.5) as client:
        port = client.base_url.port
        assert port is not None
        connect = [await anyio.connect_tcp("127.0.0.1", port) for _ in range(4)]
        silent, half_headers, trickling, short_body = connect
        await half_headers.send(HEADERS)  # and never the blank line that ends them
        await short_body.send(HEADERS + b"Content-Length: 100\r\n\r\n{\"projectPath\": ")
        async with anyio.create_task_group() as group:
            group.start_soon(_trickle, trickling)
            assert await _until_closed(silent) == b""
            assert await _until_closed(half_headers) == b""
            assert await _until_closed(trickling) == b""
            answer = await _until_closed(short_body)
        for stream in connect:
            await stream.aclose()
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert answer.endswith(b'"error":"the request body did not arrive whole within 0.5 seconds"}')


async def test_a_client_that_hangs_up_mid_body_is_one_warning(root: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The app answers it itself: raised to the server, it would be logged twice, with tracebacks."""
    app = create_app(ApiSettings(roots=(root.resolve(),)))
    arriving = [{"type": "http.request", "body": b'{"projectPath": "/x", ', "more_body": True},
                {"type": "http.disconnect"}]
    scope = {"type": "http", "method": "POST", "path": REFLECT, "raw_path": REFLECT.encode(), "query_string": b"",
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")],
             "client": ("127.0.0.1", 50123), "server": ("127.0.0.1", 8765), "scheme": "http",
             "http_version": "1.1", "root_path": "", "asgi": {"version": "3.0"}}

    async def receive() -> dict:
        return arriving.pop(0) if arriving else {"type": "http.disconnect"}

    async def send(_message: dict) -> None:
        pass

    with caplog.at_level(logging.INFO):
        await app(scope, receive, send)
    assert [(r.levelname, r.getMessage(), r.exc_info) for r in caplog.records] == [
        ("WARNING", "127.0.0.1:50123 closed the connection before the body of its POST /api/skills/reflect "
                    "was in; nothing was done", None)]
