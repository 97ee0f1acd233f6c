"""Fleet-wide locks: PostgreSQL advisory locks, held on a connection of the process's own.

Used for the two things only one worker of the fleet may do at a time: integrating into
one repository, and handing the jobs of dead workers to the living. A lock is the
server's: released when its holder's connection ends, so a worker that dies holds
nothing. It is polled (`pg_try_advisory_lock`), never waited for in the server, so a
worker told to stop is never stuck behind another's lock. A server restart drops the
connection and every lock on it: the next poll connects again, for up to half a minute.
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from reflection.postgres.connection import (
    RETRY_FOR_S,
    PostgresUnavailable,
    close_quietly,
    connect,
    first_line,
    server_gone,
)

REPOSITORY = 0x676C  # the first key of a repository's integration lock ("gl")
STALLED_JOBS = (0x676D, 0)  # the lock of whoever hands dead workers' jobs on


def repository_key(address: str) -> tuple[int, int]:
    """The repository's lock (a collision only serialises two repositories' integrations)."""
    value = zlib.crc32(address.encode())
    return REPOSITORY, value - (1 << 32) if value >= 1 << 31 else value


class AdvisoryLocks:
    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: Any = None
        self._mutex = threading.Lock()

    @asynccontextmanager
    async def hold(self, key: tuple[int, int]) -> AsyncIterator[None]:
        """Wait for the lock (polling), hold it for the block."""
        pause, gone_since = 0.02, None
        while True:
            try:
                if await anyio.to_thread.run_sync(self._try, key):
                    break
                gone_since = None
            except PostgresUnavailable:
                gone_since = gone_since or time.monotonic()
                if time.monotonic() - gone_since > RETRY_FOR_S:
                    raise
            await anyio.sleep(pause)
            pause = min(pause * 2, 0.25)
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._unlock, key)

    @asynccontextmanager
    async def attempt(self, key: tuple[int, int]) -> AsyncIterator[bool]:
        """Hold the lock for the block if it is free now; the block learns whether it is."""
        got = await anyio.to_thread.run_sync(self._try, key)
        try:
            yield got
        finally:
            if got:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self._unlock, key)

    def _try(self, key: tuple[int, int]) -> bool:
        """One try; PostgresUnavailable when the server cannot be reached even afresh."""
        with self._mutex:
            try:
                return self._try_on(key)
            except Exception as exc:
                if not server_gone(exc):
                    raise
            self._drop()  # the server restarted (the locks on that connection went with it): once more
            try:
                return self._try_on(key)
            except Exception as exc:
                if server_gone(exc):
                    raise PostgresUnavailable(first_line(exc)) from None
                raise

    def _try_on(self, key: tuple[int, int]) -> bool:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._drop()
            self._conn = connect(self.url)
        row = self._conn.execute("SELECT pg_try_advisory_lock(%s, %s)", key).fetchone()
        return bool(row and row[0])

    def _unlock(self, key: tuple[int, int]) -> None:
        with self._mutex:
            try:
                if self._conn is not None and not self._conn.closed and not self._conn.broken:
                    self._conn.execute("SELECT pg_advisory_unlock(%s, %s)", key)
            except Exception as exc:
                if not server_gone(exc):
                    raise
                self._drop()  # the connection went, and its locks with it

    def _drop(self) -> None:
        close_quietly(self._conn)
        self._conn = None

    def close(self) -> None:
        with self._mutex:
            self._drop()
