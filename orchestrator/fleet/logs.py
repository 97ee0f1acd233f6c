"""How a worker shows its libraries' logs: one line each, an outage said once, no noise at a stop.

Procrastinate, psycopg (its pool) and asyncio log at WARNING and above to stderr, each
record as one line with the first line of its exception: a database restart is news,
not a traceback. Two kinds are quietened:

- while the database is away, psycopg's pool tries to connect about every second and
  warns each time (`error connecting in 'pool-1'`): the first warning is shown, the next
  ones only once `QUIET_S` has passed (a long outage is said again every few minutes);
- Procrastinate's listener, stopped after the database restarted, reports the broken
  connection it was holding (`listener error: ConnectorException(...)`) at every stop
  of the worker, although nothing is wrong any more: it is not shown.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from typing import TextIO

QUIET_S = 300.0
LIBRARIES = ("procrastinate", "asyncio", "psycopg")


class OneLine(logging.Formatter):
    """A record and the first line of its exception."""

    def format(self, record: logging.LogRecord) -> str:
        cause = record.exc_info[1] if record.exc_info else None
        text = f"{record.levelname}: {_first(record.getMessage())}"
        return text + (f" ({type(cause).__name__}: {_first(str(cause))})" if cause else "")


def _first(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else ""


class QueueNoise(logging.Filter):
    """Drops a pool's repeated connection warnings and a stopped listener's stale error."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.clock = clock
        self.said_at: float | None = None  # when a connection warning was last shown

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.name.startswith("psycopg.pool") and message.startswith("error connecting in"):
            return self._first_in_a_while()
        return not (record.name.startswith("procrastinate") and message.startswith("listener error:")
                    and "ConnectorException" in message)

    def _first_in_a_while(self) -> bool:
        now = self.clock()
        if self.said_at is not None and now - self.said_at < QUIET_S:
            return False
        self.said_at = now
        return True


def quiet_queue_logs(stream: TextIO | None = None) -> logging.Handler:
    """Send the libraries' warnings to `stream` (stderr) as one line each, without the noise."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(OneLine())
    handler.addFilter(QueueNoise())
    for name in LIBRARIES:
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(logging.WARNING)
        logger.propagate = False
    return handler
