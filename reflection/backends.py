"""Which memory a project remembers with: JSONL files in the repository (the default,
nothing to install) or a team's PostgreSQL (`memory.store: "postgresql://..."`).

Both give a `ReflectionStore` and a `LessonRanker` that behave alike (tests/memory/ runs
one conformance suite on every store). A PostgreSQL database is shared by many
repositories, so its records carry the project's key (`project`): a store reads and
moves only its own project's records, while lessons are ranked across the whole team's
memory. Task notes (seed 000) follow the same choice unless `memory.taskReflectionStore`
says otherwise (`open_task_store`). psycopg is imported only when a URL is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from reflection.location import TASK_REFLECTIONS_PATH
from reflection.postgres.connection import PostgresUnavailable, is_postgres_url
from reflection.store import JsonlReflectionStore, ReflectionStore
from reflection.task_store import JsonTaskReflectionStore, TaskReflectionStore

if TYPE_CHECKING:
    from reflection.lesson_index import Embedder
    from reflection.lessons import LessonRanker

JSONL = "jsonl"
REFLECTIONS = "reflections.jsonl"
TASK_NOTES = TASK_REFLECTIONS_PATH.name


def describe(url: str | None) -> str:
    """The store for people: `jsonl`, or the URL without its password."""
    from reflection.postgres.connection import safe_url

    return safe_url(url) if is_postgres_url(url) else JSONL


def open_store(url: str | None, memory_dir: Path, *, project: str) -> ReflectionStore:
    """The reflection store: `url` None or "jsonl" for `<memory_dir>/reflections.jsonl`."""
    if not is_postgres_url(url):
        _check_jsonl(url)
        return JsonlReflectionStore(Path(memory_dir) / REFLECTIONS)
    from reflection.postgres.store import PostgresReflectionStore

    return PostgresReflectionStore(url, project=project)  # type: ignore[arg-type]


def open_lesson_index(url: str | None, memory_dir: Path, *, project: str,
                      embedder: Embedder | None = None) -> LessonRanker:
    """Where lessons are ranked: the SQLite cache beside the JSONL files, or PostgreSQL."""
    if not is_postgres_url(url):
        _check_jsonl(url)
        from reflection.lesson_index import LessonIndex  # sqlite: only a run that ranks lessons

        return LessonIndex(Path(memory_dir), embedder=embedder)
    from reflection.postgres.lessons import PostgresLessonIndex

    return PostgresLessonIndex(url, project=project, embedder=embedder)  # type: ignore[arg-type]


def _check_jsonl(url: str | None) -> None:
    if url not in (None, JSONL):
        raise PostgresUnavailable(f"{url!r} is no memory store: use \"jsonl\" or a postgresql:// URL")


def open_task_store(choice: str | None, url: str | None, memory_dir: Path, *, project: str) -> TaskReflectionStore:
    """Where task notes live (memory.taskReflectionStore). None: beside the reflections, in
    the shared database when `url` names one, else `<memory_dir>/task-reflections.json`;
    "file": that file always; "memory": this process only; "module:attribute": the
    project's own (reflection/task_choice.py)."""
    from reflection.task_choice import custom_store, memory_store

    if choice == "memory":
        return memory_store()
    if choice not in (None, "file"):
        return custom_store(choice)
    if choice is None and is_postgres_url(url):
        from reflection.postgres.task_notes import PostgresTaskReflectionStore

        return PostgresTaskReflectionStore(url, project=project)  # type: ignore[arg-type]
    return JsonTaskReflectionStore(Path(memory_dir) / TASK_NOTES)
