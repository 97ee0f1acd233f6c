"""One run per repository: `.openagents/agent.lock`.

The lock is an exclusive `flock` held for the whole run, so the kernel releases it when
the process dies, however it dies: a lock file whose flock can be taken is stale by
definition, with no pid guessing and no race between two runs taking it over. The file's
body (pid, host, start time) only tells a human who holds it.
"""

from __future__ import annotations

import fcntl
import os
import socket
from datetime import UTC, datetime
from pathlib import Path

import orjson

from orchestrator.layout import Layout


class LockHeld(Exception):
    """Another live run holds the repository."""


class AgentLock:
    def __init__(self, project_dir: Path) -> None:
        self.path = Layout(project_dir).lock
        self.stale_holder: dict | None = None  # who left the lock we took over, if anyone
        self._fd: int | None = None

    def acquire(self) -> AgentLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _describe(_read_holder(fd))
            os.close(fd)
            raise LockHeld(f"another goldenloop run holds {self.path} ({holder})") from None
        self.stale_holder = _read_holder(fd) or None
        body = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "startedAt": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, orjson.dumps(body) + b"\n", 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        os.ftruncate(self._fd, 0)  # an empty file means: nobody holds it
        os.close(self._fd)  # closing drops the flock
        self._fd = None

    def __enter__(self) -> AgentLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_holder(fd: int) -> dict:
    try:
        data = os.pread(fd, 4096, 0)
        holder = orjson.loads(data) if data.strip() else {}
    except (OSError, orjson.JSONDecodeError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _describe(holder: dict) -> str:
    if not holder:
        return "holder unknown"
    return f"pid {holder.get('pid')} on {holder.get('host')} since {holder.get('startedAt')}"


def describe_holder(holder: dict | None) -> str:
    return _describe(holder or {})
