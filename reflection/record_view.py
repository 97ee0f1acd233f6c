"""Every reflection a store holds, of either shape, as people look for them
(`goldenloop memory list`, `search`, `show`).

A store keeps attempt reflections (one per failed attempt, no `kind` key) and outcome
records (one per ended task). The loop reads each shape its own way; a person looking at
the memory wants both, told apart by a kind: "attempt", or the outcome ("failed",
"partial", "success", "decision").
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from reflection.lessons import Lesson, LessonQuery, RankedLesson, score_lesson
from reflection.outcome_markdown import slug
from reflection.store import ATTEMPT_KIND, ReflectionStore, record_kind
from reflection.text import shorten

__all__ = ["RecordRow", "agent_is", "attempt_bodies", "attempt_hits", "kind_of", "matching_ids", "row_of"]

TITLE_CHARS = 80


@dataclass(frozen=True)
class RecordRow:
    """One line of `memory list`."""

    created_at: str
    kind: str
    task_id: str
    agent: str
    title: str
    id: str


def kind_of(body: dict[str, Any]) -> str:
    """"attempt", or the outcome of an outcome record."""
    return ATTEMPT_KIND if "kind" not in body else str(body.get("outcome") or body.get("kind"))


def row_of(body: dict[str, Any]) -> RecordRow:
    """What a listing shows of a record: an attempt's title is its subtask and analysis."""
    kind = kind_of(body)
    if kind == ATTEMPT_KIND:
        title = f"{body.get('subtaskId', '')} #{body.get('attemptNumber', '?')}: {body.get('analysis', '')}"
        agent = str(body.get("model") or "-")
    else:
        title, agent = str(body.get("title", "")), str(body.get("agent", ""))
    return RecordRow(created_at=str(body.get("createdAt", ""))[:10], kind=kind, task_id=str(body.get("taskId", "")),
                     agent=agent, title=shorten(" ".join(title.split()), TITLE_CHARS), id=str(body["id"]))


def agent_is(row: RecordRow, wanted: str) -> bool:
    """Whether `wanted` names the row's agent as listed, or as its pages' folder under
    reflections/ (`fix_agent` and `fix-agent` alike); the records keep the name as written."""
    return wanted == row.agent or wanted.rstrip("/") == slug(row.agent, "agent")


def _raw(store: ReflectionStore) -> Iterator[tuple[dict[str, Any] | None, bool]]:
    """(body, archived) of every line the store holds, where it can say (both backends can)."""
    raw = getattr(store, "raw_records", None)
    if raw is not None:
        yield from raw()
        return
    for reflection in store.iterate():  # a store without raw access: its live attempt reflections
        yield reflection.to_dict(), False


def attempt_bodies(store: ReflectionStore, *, archived: bool) -> list[dict[str, Any]]:
    """The attempt reflections, live or archived, as stored, each id once."""
    found: dict[str, dict[str, Any]] = {}
    for body, is_archived in _raw(store):
        if body is not None and is_archived == archived and record_kind(body) == ATTEMPT_KIND:
            found.setdefault(body["id"], body)
    return list(found.values())


def matching_ids(store: ReflectionStore, prefix: str) -> list[str]:
    """The ids of every record, live or archived, that start with `prefix`, each once."""
    found = {body["id"]: None for body, _ in _raw(store) if body is not None and body["id"].startswith(prefix)}
    return sorted(found)


def attempt_hits(store: ReflectionStore, text: str, limit: int) -> list[RankedLesson]:
    """The live attempt reflections that fit a free-text query, scored as lessons are
    (the same tools, words and files), best first."""
    query = LessonQuery(text=text, by_person=True)
    ranked: list[RankedLesson] = []
    for body in attempt_bodies(store, archived=False):
        lesson = Lesson.from_record(body)
        scored = score_lesson(lesson, query, 1.0) if lesson is not None else None
        if scored is not None:
            ranked.append(scored)
    ranked.sort(key=lambda r: (r.score, r.lesson.created_at), reverse=True)
    return ranked[:limit]
