"""Where task reflections live: the `TaskReflectionStore` protocol and two stores.

The file store keeps one JSON object per project, `{identity: reflection}`
(`.openagents/memory/task-reflections.json`, docs/ARCHITECTURE.md, "Files"). It is
small (one entry per distinct task description), so a write rewrites it whole: read,
change one entry, write a temp file, fsync, rename. The read-change-write runs under
an exclusive `flock` on a sidecar `<file>.lock`, so two processes storing at once both
keep their entry; a reader takes no lock, since a rename shows it the old file or the
new one, never half of one. Last write wins for one identity: a later reflection has
seen more runs.

The library never imports the orchestrator, so the few lines of atomic writing and
locking are its own here, as in reflection/store.py.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import orjson
from pydantic import ValidationError

from reflection.fileio import atomic_write, file_lock
from reflection.location import TASK_REFLECTIONS_PATH
from reflection.task_reflection import TaskReflection

log = logging.getLogger("goldenloop.task_store")


@runtime_checkable
class TaskReflectionStore(Protocol):
    """The notes of each task identity; safe to share between threads."""

    def store(self, identity: str, reflection: TaskReflection) -> None:
        """Keep `reflection` for `identity`, replacing any earlier one."""
        ...

    def retrieve(self, identity: str) -> TaskReflection | None:
        """The latest reflection for `identity`, or None."""
        ...


class InMemoryTaskReflectionStore:
    """For tests and for runs that must leave nothing on disk; lost when the process ends."""

    location: str | None = None

    def __init__(self) -> None:
        self._items: dict[str, TaskReflection] = {}
        self._lock = threading.Lock()

    def store(self, identity: str, reflection: TaskReflection) -> None:
        with self._lock:
            self._items[identity] = reflection

    def retrieve(self, identity: str) -> TaskReflection | None:
        with self._lock:
            return self._items.get(identity)


class JsonTaskReflectionStore:
    """One JSON file of task reflections, shared by processes (see the module's note)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock_path = self.path.with_name(self.path.name + ".lock")
        self._thread_lock = threading.Lock()  # flock does not exclude threads of one process

    @classmethod
    def for_project(cls, project_dir: Path) -> JsonTaskReflectionStore:
        return cls(Path(project_dir) / TASK_REFLECTIONS_PATH)

    @property
    def location(self) -> str:
        return str(self.path)

    def store(self, identity: str, reflection: TaskReflection) -> None:
        with self._locked():
            entries = self._read()
            entries[identity] = reflection.to_dict()
            self._write(entries)

    def retrieve(self, identity: str) -> TaskReflection | None:
        entry = self._read().get(identity)
        if entry is None:
            return None
        try:
            return TaskReflection.model_validate(entry)
        except ValidationError as exc:
            log.warning("%s: the entry %s is not a task reflection (%s); ignored",
                        self.path, identity[:12], exc.error_count())
            return None

    def _read(self) -> dict[str, Any]:
        """The file's entries; an unreadable file counts as empty (and is logged), so a
        damaged cache costs the notes, never the run."""
        try:
            data = orjson.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        except (OSError, orjson.JSONDecodeError) as exc:
            log.warning("cannot read %s (%s); starting from no task reflections", self.path, exc)
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, entries: dict[str, Any]) -> None:
        atomic_write(self.path, orjson.dumps(entries, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._thread_lock, file_lock(self._lock_path, timeout_s=None):
            yield
