"""The run log: one JSON line per step in `.openagents/runs/<runId>.jsonl`.

Every event is redacted, written with a single append (so a crash loses at most the
event being written), and passed to the listeners that render it for a human or as
JSON lines. The log holds enough to replay a run: prompts' sizes, model calls with
tokens, cost and latency, verdicts, reflections, commits and escalations.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from orchestrator.layout import Layout
from reflection.redact import redact_data

log = logging.getLogger("goldenloop.runlog")

Event = dict[str, Any]
Listener = Callable[[Event], None]


def new_run_id() -> str:
    """Sortable and unique enough across hosts: UTC time plus random bits (os.urandom, as
    `secrets` would read them, without loading `secrets` and its hmac at every start)."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + os.urandom(3).hex()


class RunLog:
    def __init__(self, project_dir: Path, run_id: str | None = None, *, persist: bool = True) -> None:
        self.run_id = run_id or new_run_id()
        self.persist = persist  # False until the folder is known to be a usable project
        self.project_dir = project_dir
        self.listeners: list[Listener] = []
        self._lock = threading.Lock()  # parallel workers share one log

    @property
    def path(self) -> Path:
        return Layout(self.project_dir).run_log(self.run_id)

    def attach(self, project_dir: Path) -> None:
        """Start writing, under the project's top folder (the run may start in a subfolder)."""
        self.project_dir = project_dir
        self.persist = True

    def subscribe(self, listener: Listener) -> None:
        self.listeners.append(listener)

    def event(self, name: str, /, **fields: Any) -> Event:
        """Record one step; returns the event as written."""
        record: Event = {
            "ts": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "runId": self.run_id,
            "event": name,
        }
        record.update(redact_data({k: v for k, v in fields.items() if v is not None}))
        line = orjson.dumps(record, default=_jsonable) + b"\n"
        with self._lock:
            if self.persist:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    os.write(fd, line)
                finally:
                    os.close(fd)
            for listener in self.listeners:
                try:
                    listener(record)
                except Exception as exc:  # noqa: BLE001 - a display must not stop a run
                    log.warning("an event listener failed: %s", exc)
        return record


def _jsonable(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, Path | set | frozenset):
        return str(value) if isinstance(value, Path) else sorted(value)
    raise TypeError(f"cannot log a {type(value).__name__}")


def read_events(path: Path) -> list[Event]:
    """All whole events of a run log (a torn last line is skipped)."""
    events = []
    for line in path.read_bytes().splitlines():
        try:
            events.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            continue
    return events
