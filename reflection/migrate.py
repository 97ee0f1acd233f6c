"""Copying a project's memory between its JSONL files and a team's PostgreSQL, either way.

`migrate(source, target)` copies every record (attempt reflections and outcome records,
live and archived: an archived record stays archived) and every lesson use. It is
idempotent: a record whose id the target already holds, and a use already recorded
there, are left alone, so a second run copies nothing and a run cut short is finished
by running it again. Lines of the source that are no record (unreadable, or another
tool's) are counted and skipped. Lessons need no copying: PostgreSQL derives them from
the outcome records as they arrive, and the JSONL side's lessons.sqlite from the file.

A memory is named as `memory.store` names it: "jsonl" (the project's
`.openagents/memory/`) or a postgresql:// URL (with the project's key, since a database
holds many projects). psycopg is imported only for a URL.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlsplit

import orjson

from reflection.backends import REFLECTIONS, describe
from reflection.lesson_index import append_lines, use_line
from reflection.lessons import USES
from reflection.postgres.connection import is_postgres_url
from reflection.store import JsonlReflectionStore, as_utc

Use = tuple[str, str, int, bool, datetime]  # lesson id, task id, attempt, passed, at
USE_BATCH = 1000


class Memory(Protocol):
    """One end of a copy: raw records and lesson uses, read and added."""

    location: str

    def raw_records(self) -> Iterator[tuple[dict[str, Any] | None, bool]]:
        """(body, archived) of every record, oldest first; None for a line that is no record."""
        ...

    def add_raw(self, records: Iterable[tuple[dict[str, Any], bool]]) -> int:
        """Add the records whose id is not here yet; how many were new."""
        ...

    def raw_uses(self) -> Iterator[dict[str, Any] | None]:
        """Every lesson use, as a `lesson-uses.jsonl` object; None for a line that is none."""
        ...

    def add_uses(self, uses: Iterable[Use]) -> int:
        """Add the uses not recorded here yet; how many were new."""
        ...

    def close(self) -> None: ...


@dataclass
class MigrationReport:
    copied: int = 0
    already_there: int = 0
    skipped: int = 0  # source lines that are no record
    uses_copied: int = 0
    uses_already_there: int = 0
    uses_skipped: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"copied": self.copied, "alreadyThere": self.already_there, "skipped": self.skipped,
                "usesCopied": self.uses_copied, "usesAlreadyThere": self.uses_already_there,
                "usesSkipped": self.uses_skipped}


def same_memory(a: str | None, b: str | None) -> bool:
    """Whether two `memory.store` values name one memory (a password does not tell them apart)."""
    if not is_postgres_url(a) or not is_postgres_url(b):
        return not is_postgres_url(a) and not is_postgres_url(b)
    return _database_of(a) == _database_of(b)  # type: ignore[arg-type]


def _database_of(url: str) -> tuple[object, ...]:
    """What names the database in a URL: user, host, port, name and options, no password."""
    parts = urlsplit(url)
    options = sorted((k, v) for k, v in parse_qsl(parts.query) if k != "password")
    return parts.username, parts.hostname, parts.port, parts.path, tuple(options)


def open_memory(url: str | None, memory_dir: Path, *, project: str) -> Memory:
    """The memory `url` names: None or "jsonl" for the files in `memory_dir`, else the
    project's rows in PostgreSQL. PostgresUnavailable (one sentence) when it cannot be used."""
    if not is_postgres_url(url):
        return JsonlMemory(memory_dir)
    return PostgresMemory(url, project=project)  # type: ignore[arg-type]


def migrate(source: Memory, target: Memory) -> MigrationReport:
    """Copy `source` into `target`; see the module docstring."""
    report = MigrationReport()
    offered = 0

    def records() -> Iterator[tuple[dict[str, Any], bool]]:
        nonlocal offered
        for body, archived in source.raw_records():
            if body is None:
                report.skipped += 1
                continue
            offered += 1
            yield body, archived

    report.copied = target.add_raw(records())
    report.already_there = offered - report.copied
    uses = list(_readable_uses(source.raw_uses(), report))
    report.uses_copied = target.add_uses(uses)
    report.uses_already_there = len(uses) - report.uses_copied
    return report


def _readable_uses(lines: Iterable[dict[str, Any] | None], report: MigrationReport) -> Iterator[Use]:
    for obj in lines:
        use = parse_use(obj)
        if use is None:
            report.uses_skipped += 1
        else:
            yield use


def parse_use(obj: Any) -> Use | None:
    """One `lesson-uses.jsonl` object as a Use; None when it lacks a lesson id or a time."""
    if not isinstance(obj, dict) or not isinstance(obj.get("lessonId"), str) or not isinstance(obj.get("at"), str):
        return None
    try:
        at = as_utc(datetime.fromisoformat(obj["at"]))
    except ValueError:
        return None
    task_id = obj.get("taskId") if isinstance(obj.get("taskId"), str) else ""
    attempt = obj.get("attempt") if type(obj.get("attempt")) is int else 0
    return obj["lessonId"], task_id, attempt, obj.get("passed") is True, at


class JsonlMemory:
    """The project's `.openagents/memory/`: reflections.jsonl, its archive, lesson-uses.jsonl."""

    def __init__(self, memory_dir: Path) -> None:
        self.memory_dir = Path(memory_dir)
        self.store = JsonlReflectionStore(self.memory_dir / REFLECTIONS)
        self.location = str(self.memory_dir)

    def raw_records(self) -> Iterator[tuple[dict[str, Any] | None, bool]]:
        return self.store.raw_records()

    def add_raw(self, records: Iterable[tuple[dict[str, Any], bool]]) -> int:
        return self.store.add_raw(records)

    def raw_uses(self) -> Iterator[dict[str, Any] | None]:
        try:
            handle = (self.memory_dir / USES).open("rb")
        except FileNotFoundError:
            return
        with handle:
            for line in handle:
                if line.strip():
                    try:
                        yield orjson.loads(line)
                    except orjson.JSONDecodeError:
                        yield None

    def add_uses(self, uses: Iterable[Use]) -> int:
        """Append the uses whose (lesson, task, attempt, time) the file does not hold yet."""
        seen = {_use_key(use) for use in map(parse_use, self.raw_uses()) if use is not None}
        new = []
        for use in uses:
            if _use_key(use) not in seen:
                seen.add(_use_key(use))
                new.append(use_line(*use))
        for start in range(0, len(new), USE_BATCH):
            append_lines(self.memory_dir / USES, new[start : start + USE_BATCH])
        return len(new)

    def close(self) -> None:
        self.store.close()


def _use_key(use: Use) -> tuple[str, str, int, datetime]:
    lesson_id, task_id, attempt, _, at = use
    return lesson_id, task_id, attempt, at


class PostgresMemory:
    """One project's rows in a team's PostgreSQL: its records, and the uses it recorded."""

    def __init__(self, url: str, *, project: str) -> None:
        from reflection.postgres.lessons import PostgresLessonIndex
        from reflection.postgres.store import PostgresReflectionStore

        self.store = PostgresReflectionStore(url, project=project)
        try:
            self.index = PostgresLessonIndex(url, project=project)
        except BaseException:
            self.store.close()
            raise
        self.location = f"{describe(url)} (project {project})"

    def raw_records(self) -> Iterator[tuple[dict[str, Any] | None, bool]]:
        return self.store.raw_records()  # type: ignore[return-value]  # never None: only records are stored

    def add_raw(self, records: Iterable[tuple[dict[str, Any], bool]]) -> int:
        return self.store.add_raw(records)

    def raw_uses(self) -> Iterator[dict[str, Any] | None]:
        return self.index.raw_uses()  # type: ignore[return-value]

    def add_uses(self, uses: Iterable[Use]) -> int:
        return self.index.add_uses(list(uses))

    def close(self) -> None:
        self.store.close()
        self.index.close()
