"""Helpers of the API tests: the app served for real (uvicorn on a free loopback port, in
a thread; start-up awaited on an event the server sets once it listens, never a fixed
sleep), the app called in-process where no socket matters, and the bodies they send."""

from __future__ import annotations

import socket
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import anyio
import httpx
import uvicorn

from orchestrator.api.app import create_app
from orchestrator.api.server import server_config
from orchestrator.api.settings import ApiSettings
from orchestrator.commands.serve import listen

Serve = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]
REFLECT = "/api/skills/reflect"
HISTORY = "/api/skills/reflect/history"


class _Server(uvicorn.Server):
    """uvicorn's server, telling a thread-safe event when it listens."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.listening.set()


# Only a guard against a hang: a busy machine may take many seconds for a first request
# that imports litellm, and no test here is about speed.
_PATIENCE_S = 120


@asynccontextmanager
async def serving(settings: ApiSettings) -> AsyncIterator[httpx.AsyncClient]:
    listener = listen("127.0.0.1", 0)
    port = listener.getsockname()[1]
    server = _Server(server_config(settings, log_level="critical"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    try:
        if not await anyio.to_thread.run_sync(server.listening.wait, _PATIENCE_S):
            raise RuntimeError(f"uvicorn did not start within {_PATIENCE_S} s")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=_PATIENCE_S) as client:
            yield client
    finally:
        server.should_exit = True
        await anyio.to_thread.run_sync(thread.join, 10)
        listener.close()


@asynccontextmanager
async def in_process(settings: ApiSettings) -> AsyncIterator[httpx.AsyncClient]:
    """The app without a server, for what only the app decides: faster, and no port."""
    transport = httpx.ASGITransport(app=create_app(settings))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client


def conversation(*, secret: str = "") -> list[dict[str, str]]:
    """A small coding session: a failing test, a fix, passing tests, a claim of completion."""
    return [
        {"role": "user", "content": "Make parse_row keep the last field"},
        {"role": "tool", "name": "Read", "content": "src/csvlite/parser.py: def parse_row(line): ..."},
        {"role": "tool", "name": "Bash", "content": "pytest -q\nFAILED tests/test_parser.py::test_tail\n"
                                                   "AssertionError: 'c' missing\n1 failed, 4 passed"},
        {"role": "assistant",
         "content": f"Edited src/csvlite/parser.py and added tests/test_parser.py::test_eof. {secret}"},
        {"role": "tool", "name": "Edit", "content": "applied 1 edit"},
        {"role": "tool", "name": "Bash", "content": "pytest -q\n5 passed in 0.04s"},
        {"role": "assistant", "content": "Done: the last field is kept and all tests pass."},
    ]


def reflect_body(project: Path, session: str = "session-1", **extra: object) -> dict[str, object]:
    return {"projectPath": str(project), "sessionId": session, "conversation": conversation(),
            "taskDescription": "Keep the last field when a line has no trailing newline", **extra}


def history_file(project: Path) -> Path:
    return project / ".openagents" / "memory" / "reflect-history.jsonl"
