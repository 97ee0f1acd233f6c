"""The Reflect API feeds the memory the golden loop reads.

A reflection made through the API is a lesson about a session's work. Besides its line
in reflect-history.jsonl, it leaves an outcome record (reflection/reflect_memory.py) in
the store the project's `project.json` names: `.openagents/memory/reflections.jsonl`,
or the team's PostgreSQL database of `memory.store`. The loop ranks those records as
lessons for the next task's first prompt, so what a session taught reaches the next
task, whichever way it was reflected on.

Runs in the project's worker thread (routes.record). The JSONL files are checked for
links first, as the history is (a link: nothing written, and the reason says so). A project.json that cannot
be read, or a store that cannot be reached, costs the lesson, never the reflection: the
answer's `memory.reason` says why nothing was kept.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from reflection.fileio import LockTimeout
from reflection.reflect_history import ReflectHistory, UnsafeHistoryPath, Unsynced

if TYPE_CHECKING:  # the config and the store are loaded by the first reflection, not at start-up
    from orchestrator.config import ProjectConfig
    from reflection.redaction_policy import RedactionPolicy
    from reflection.reflect_skill import Reflected
    from reflection.store import ReflectionStore


@dataclass(frozen=True)
class Remembered:
    """What the project's memory kept of a reflection: the lesson's id, or why none."""

    lesson_id: str | None
    reason: str


class MemoryFeed:
    """One project's memory as the API writes it; its store opened once and kept."""

    def __init__(self, project: Path, history: ReflectHistory) -> None:
        self.project = project
        self.history = history
        self._store: ReflectionStore | None = None
        self._url: str | None = None
        self._loaded: tuple[tuple[int, int, int] | None, ProjectConfig] | None = None
        self._lock = threading.Lock()

    def files(self) -> tuple[str, ...]:
        """The memory files a lesson is written to by path (the JSONL store's), for the
        history's append to check on its way there; none for a database, or when
        project.json cannot be used (`remember` says why)."""
        from orchestrator.config import ConfigError, memory_store_url

        try:
            return () if memory_store_url(self._config().memory.store) else _jsonl_files()
        except ConfigError:
            return ()

    def remember(self, reflected: Reflected, written: Unsynced | None = None) -> Remembered:
        """The reflection's lesson kept, or why not. `written`: the history's append of the
        same reflection, when it checked the memory files on its way (one walk, not two)."""
        from orchestrator.config import ConfigError, memory_store_url
        from reflection.postgres.connection import PostgresUnavailable
        from reflection.reflect_memory import lesson_of
        from reflection.reflect_skill import MIN_CONFIDENCE

        try:
            config = self._config()
            memory = config.memory
            url = memory_store_url(memory.store)
        except ConfigError:
            return Remembered(None, "the project's .openagents/project.json cannot be used, "
                                    "so its memory was left alone")
        lesson = lesson_of(reflected, success_procedures=memory.success_procedures)
        if lesson is None and reflected.result.confidence < MIN_CONFIDENCE:
            return Remembered(None, "nothing to learn: most criteria could not be judged, so the score is not trusted")
        if lesson is None:
            return Remembered(None, "nothing to learn: no improvement to keep, or a pass without a failure on the way")
        try:
            if url is None:
                _check(self.history, written)
            self._store_for(config, url).append_outcome(lesson)
        except UnsafeHistoryPath as exc:
            return Remembered(None, str(exc))
        except (OSError, LockTimeout, PostgresUnavailable) as exc:
            return Remembered(None, f"the project's memory store could not be written: {type(exc).__name__}")
        return Remembered(lesson.id, f"kept as a {lesson.outcome} lesson in the project's memory")

    def redaction(self) -> RedactionPolicy | None:
        """The project's redaction settings (None: its project.json cannot be used, and its
        memory is left alone: the built-in rules still apply)."""
        from orchestrator.config import ConfigError

        try:
            return self._config().redaction.policy()
        except ConfigError:
            return None

    def _config(self) -> ProjectConfig:
        """project.json as loaded, read and checked again only when the file changed: a
        reflection should not pay for validating a whole config it never changes."""
        from orchestrator.config import config_path, load_config

        try:
            seen = config_path(self.project).stat()
            key: tuple[int, int, int] | None = (seen.st_ino, seen.st_size, seen.st_mtime_ns)
        except FileNotFoundError:
            key = None
        with self._lock:
            if self._loaded is None or self._loaded[0] != key:
                self._loaded = (key, load_config(self.project).config)
            return self._loaded[1]

    def _store_for(self, config: ProjectConfig, url: str | None) -> ReflectionStore:
        """The store `url` names (None: the JSONL files), reopened when project.json changed it."""
        from orchestrator.loop.project_memory import configured_store

        with self._lock:
            if self._store is None or url != self._url:
                if self._store is not None:
                    self._store.close()
                self._store, self._url = configured_store(config, self.project), url
            return self._store

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None


def _jsonl_files() -> tuple[str, str]:
    from reflection.backends import REFLECTIONS  # loaded by the first reflection, as the store is

    return REFLECTIONS, REFLECTIONS + ".lock"


def _check(history: ReflectHistory, written: Unsynced | None) -> None:
    """UnsafeHistoryPath (or an OSError) when a JSONL memory file is a link or no regular
    file; the append's finding when it checked the same files on its way, else a walk."""
    files = _jsonl_files()
    if written is None or written.checked != files:
        history.check_memory_files(*files)
    elif written.unsafe is not None:
        raise written.unsafe
