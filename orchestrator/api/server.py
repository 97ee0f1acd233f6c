"""How uvicorn serves the app: `server_config(settings)`, for `goldenloop serve`, its tests
and its benchmark alike.

uvicorn waits for a request's headers as long as a client likes: its keep-alive timeout
covers only the quiet between two requests, and the first byte of a request (or a
connection that never sends one) stops it. `HeaderDeadline` closes a connection whose
request line and headers are not all in within `read_timeout` seconds of the connection
opening or of the request's first byte; trickling bytes does not extend it. The body has
its own deadline, kept by `guard.read_body`.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from orchestrator.api.app import create_app
from orchestrator.api.settings import ApiSettings


def server_config(settings: ApiSettings, **overrides: Any) -> uvicorn.Config:
    protocol = functools.partial(HeaderDeadline, header_timeout_s=settings.read_timeout)
    options: dict[str, Any] = {"http": protocol, "lifespan": "off", "server_header": False, "access_log": False,
                               "ws": "none", **overrides}
    return uvicorn.Config(create_app(settings), **options)


class HeaderDeadline(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request's headers."""

    def __init__(self, *args: Any, header_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout_s = header_timeout_s
        self.header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:  # a request begins, or its headers go on
            self._arm()
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:  # the headers are in (or the connection failed)
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self.header_timer is None:
            self.header_timer = self.loop.call_later(self.header_timeout_s, self._expire)

    def _disarm(self) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None

    def _expire(self) -> None:
        self.header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()
