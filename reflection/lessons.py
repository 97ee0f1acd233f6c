"""Lessons: what a stored reflection teaches, and how well it fits the attempt about to run.

`.openagents/memory/reflections.jsonl` holds two shapes of record: attempt reflections
(no `kind` key) and outcome records (`"kind": "outcome"`). `Lesson.from_record` reads
either from its plain JSON object, so this module depends on no record class; anything
else on a line (another shape, a record with nothing to teach) gives None.

Scoring (`score_lesson`) is deliberately one small function so that a run log can say
why a lesson was chosen:

    relevance  = text similarity * TEXT + same task type * TASK_TYPE
                 + label overlap * LABELS + file overlap * FILES + same signature * SIGNATURE
    usefulness = 2 * (helped + 1) / (shown + 2)
    score      = relevance * usefulness

A lesson with no relevance is never returned, however useful it was elsewhere. The
usefulness factor is 1.0 for a lesson never shown, rises towards 2 for one that keeps
being followed by passing attempts and falls towards 0 for one shown many times that
never helped, so lessons that never help fade. Recency only breaks ties.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson

from reflection.text import shorten

USES = "lesson-uses.jsonl"  # beside reflections.jsonl: each showing of a lesson, and whether it helped
TEXT_CHARS = 600  # a lesson's text: room for an attempt's analysis and suggestion, clipped
RULE_PREFIX = "i should follow this rule:"
OUTCOMES = ("failed", "partial", "success", "decision")

# Relevance weights. Text is the broad signal; a shared error signature or file is the
# strongest evidence that a lesson is about the same problem, so they weigh more.
TEXT = 0.8
TASK_TYPE = 0.5
LABELS = 0.5
FILES = 1.0
SIGNATURE = 1.5
BASENAME_ONLY = 0.5  # a file of the same name elsewhere counts half


@dataclass(frozen=True)
class Lesson:
    """One thing a past attempt or task taught, ready to be ranked and shown."""

    id: str
    task_id: str
    kind: str  # "attempt" or an outcome: "failed", "partial", "success", "decision"
    text: str
    rule: str | None
    task_type: str | None
    labels: tuple[str, ...]
    files: tuple[str, ...]
    error_signature: str | None
    created_at: str
    agent: str | None
    context: str = ""  # words it is found by but does not teach (title, what went wrong)
    # The project it comes from when a team's shared store ranked another project's
    # lesson (reflection/postgres/lessons.py); "" for the asking project's own. Last, so
    # that lessons.sqlite rows written before it still read.
    project: str = ""

    @classmethod
    def from_record(cls, obj: Any) -> Lesson | None:
        """The lesson in one JSONL object, or None when it is no record or teaches nothing."""
        if not isinstance(obj, dict) or not _text(obj, "id") or not _text(obj, "taskId"):
            return None
        if "kind" not in obj:
            return _from_attempt(obj)
        if obj.get("kind") == "outcome" and obj.get("outcome") in OUTCOMES:
            return _from_outcome(obj)
        return None

    @property
    def search_text(self) -> str:
        """Everything a text search should match against."""
        parts = [self.text, self.rule or "", self.context, self.task_type or "", *self.labels]
        return "\n".join(part for part in parts if part)

    def to_json(self) -> bytes:
        return orjson.dumps([getattr(self, f.name) for f in fields(self)])

    @classmethod
    def from_json(cls, data: bytes | str) -> Lesson:
        values = orjson.loads(data)
        values[6], values[7] = tuple(values[6]), tuple(values[7])  # labels, files
        return cls(*values)


def _text(obj: dict[str, Any], key: str) -> str:
    """A string field, whitespace-collapsed; '' when absent or not a string."""
    value = obj.get(key)
    return " ".join(value.split()) if isinstance(value, str) else ""


def _texts(obj: dict[str, Any], key: str) -> tuple[str, ...]:
    value = obj.get(key)
    if not isinstance(value, list):
        return ()
    return tuple(item.strip() for item in value if isinstance(item, str) and item.strip())


def _joined(*parts: str, sep: str = " ") -> str:
    return sep.join(part for part in parts if part)


def _from_attempt(obj: dict[str, Any]) -> Lesson | None:
    analysis, suggestion = _text(obj, "analysis"), _text(obj, "suggestion")
    text = _joined(analysis, suggestion, sep=" -> ")
    if not text:
        return None
    return Lesson(
        id=_text(obj, "id"),
        task_id=_text(obj, "taskId"),
        kind="attempt",
        text=shorten(text, TEXT_CHARS),
        rule=None,
        task_type=None,
        labels=(),
        files=_texts(obj, "filesModified"),
        error_signature=_text(obj, "errorSignature") or None,
        created_at=_text(obj, "createdAt"),
        agent=_text(obj, "model") or None,
        context=_joined(*_texts(obj, "actionItems")),
    )


def _outcome_text(obj: dict[str, Any], outcome: str) -> str:
    """What the outcome teaches, in the fields its kind of reflection has for it."""
    if outcome == "failed":
        return _text(obj, "whatToDoDifferently") or _text(obj, "tacticalRule")
    if outcome == "partial":
        return _text(obj, "whatToDoDifferently")
    if outcome == "success":
        return _joined(_text(obj, "strategy"), _text(obj, "whyItWorked"), sep=" — ")
    return _joined(_text(obj, "decision"), _text(obj, "whyChosen"), sep=" — ")


def rule_of(obj: dict[str, Any]) -> str | None:
    """The tactical rule, else the MARS principle without its "I should follow this rule:"."""
    rule = _text(obj, "tacticalRule")
    if not rule:
        principle = _text(obj, "principle")
        if principle.lower().startswith(RULE_PREFIX):
            principle = principle[len(RULE_PREFIX) :].strip()
        rule = principle
    return rule or None


def _from_outcome(obj: dict[str, Any]) -> Lesson | None:
    outcome = obj["outcome"]
    rule = rule_of(obj)
    text = _outcome_text(obj, outcome) or rule or ""
    if not text:
        return None
    context = _joined(
        _text(obj, "title"), _text(obj, "whatHappened"), _text(obj, "whatWentWrong"), _text(obj, "whyItWentWrong")
    )
    return Lesson(
        id=_text(obj, "id"),
        task_id=_text(obj, "taskId"),
        kind=outcome,
        text=shorten(text, TEXT_CHARS),
        rule=rule,
        task_type=_text(obj, "taskType") or None,
        labels=_texts(obj, "labels"),
        files=_texts(obj, "files"),
        error_signature=_text(obj, "errorSignature") or None,
        created_at=_text(obj, "createdAt"),
        agent=_text(obj, "agent") or None,
        context=shorten(context, TEXT_CHARS),
    )


@dataclass(frozen=True)
class LessonQuery:
    """What the attempt about to run is about."""

    text: str
    task_type: str | None = None
    labels: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    error_signatures: tuple[str, ...] = ()
    exclude_task_id: str | None = None  # the asking task: its own lessons are in its retries already


@dataclass(frozen=True)
class RankedLesson:
    lesson: Lesson
    score: float
    why: dict[str, float | int | None] = field(default_factory=dict)  # every component, for the run log


def normal_path(path: str) -> str:
    path = path.strip().replace("\\", "/")
    return path[2:] if path.startswith("./") else path


def basename(path: str) -> str:
    return normal_path(path).rsplit("/", 1)[-1]


def file_overlap(lesson_files: Iterable[str], query_files: Iterable[str]) -> float:
    """1.0 when a lesson names a file the query names, 0.5 when only a file name matches."""
    paths = {normal_path(f) for f in query_files}
    if not paths:
        return 0.0
    names = {basename(f) for f in paths}
    best = 0.0
    for lesson_file in lesson_files:
        if normal_path(lesson_file) in paths:
            return 1.0
        if basename(lesson_file) in names:
            best = BASENAME_ONLY
    return best


def label_overlap(lesson_labels: Sequence[str], query_labels: Sequence[str]) -> float:
    """The share of the query's labels that the lesson carries too."""
    wanted = {label.lower() for label in query_labels}
    if not wanted:
        return 0.0
    return len(wanted & {label.lower() for label in lesson_labels}) / len(wanted)


def usefulness(shown: int, helped: int) -> float:
    """2 * (helped + 1) / (shown + 2): 1.0 unproven, towards 0 when it never helped."""
    return 2.0 * (helped + 1) / (shown + 2)


def created_timestamp(lesson: Lesson) -> float:
    """Seconds since the epoch of `created_at`; 0 when it cannot be read (oldest)."""
    try:
        moment = datetime.fromisoformat(lesson.created_at)  # 3.11 reads a trailing "Z"
    except ValueError:
        return 0.0
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def score_lesson(
    lesson: Lesson,
    query: LessonQuery,
    text_similarity: float,
    *,
    shown: int = 0,
    helped: int = 0,
    now: datetime | None = None,
) -> RankedLesson | None:
    """The lesson's score for `query`, or None when it is not relevant or not allowed.

    `text_similarity` is in [0, 1]: bm25 relative to the best candidate, or a cosine.
    """
    if query.exclude_task_id is not None and lesson.task_id == query.exclude_task_id:
        return None
    same_type = float(bool(query.task_type) and (lesson.task_type or "").lower() == query.task_type.lower())
    labels = label_overlap(lesson.labels, query.labels)
    files = file_overlap(lesson.files, query.files)
    signature = float(bool(lesson.error_signature) and lesson.error_signature in query.error_signatures)
    text = min(max(text_similarity, 0.0), 1.0)
    relevance = TEXT * text + TASK_TYPE * same_type + LABELS * labels + FILES * files + SIGNATURE * signature
    if relevance <= 0.0:
        return None
    factor = usefulness(shown, helped)
    created = created_timestamp(lesson)
    age_days = round(((now or datetime.now(UTC)).timestamp() - created) / 86400, 1) if created else None
    why = {
        "text": round(text, 4),
        "task_type": same_type,
        "labels": round(labels, 4),
        "files": files,
        "signature": signature,
        "relevance": round(relevance, 4),
        "shown": shown,
        "helped": helped,
        "usefulness": round(factor, 4),
        "age_days": age_days,
    }
    return RankedLesson(lesson=lesson, score=relevance * factor, why=why)


def normal_text(text: str) -> str:
    """Lowercase words only: two texts that differ in case, spacing or punctuation are the same."""
    return " ".join(re.findall(r"\w+", text.lower()))


def best_lessons(ranked: Iterable[RankedLesson], limit: int) -> list[RankedLesson]:
    """The `limit` best, highest score first, newest first on a tie, each text once."""
    ordered = sorted(ranked, key=lambda r: (r.score, created_timestamp(r.lesson), r.lesson.id), reverse=True)
    chosen: list[RankedLesson] = []
    seen: set[str] = set()
    for item in ordered:
        key = normal_text(item.lesson.text)
        if key in seen:
            continue
        seen.add(key)
        chosen.append(item)
        if len(chosen) >= limit:
            break
    return chosen


class LessonRanker(Protocol):
    """Where lessons are ranked: the SQLite cache beside the JSONL files
    (reflection/lesson_index.py) or the team's PostgreSQL (reflection/postgres/lessons.py).
    Both score with `score_lesson`, so a lesson ranks the same on either."""

    def rank(self, query: LessonQuery, limit: int = 3) -> list[RankedLesson]:
        """The `limit` lessons that best fit `query`, best first; never the excluded task's."""
        ...

    def search(self, text: str, limit: int = 10) -> list[RankedLesson]:
        """The same ranking for a free-text query (`goldenloop memory search`)."""
        ...

    def record_use(self, lesson_ids: Iterable[str], *, task_id: str, attempt: int, passed: bool) -> None:
        """Note that these lessons were shown to an attempt, and whether it passed."""
        ...

    def usefulness(self, lesson_id: str) -> tuple[int, int]:
        """(shown, helped) of one lesson."""
        ...

    def proven(self, min_helped: int) -> list[tuple[Lesson, int, int]]:
        """(lesson, shown, helped) for every lesson followed by at least `min_helped` passes."""
        ...

    def has_uses(self) -> bool:
        """Whether any lesson was ever shown (no rule can have proved itself before)."""
        ...

    def get(self, lesson_id: str) -> Lesson | None:
        """One lesson by id (of another project too, in a shared memory); None if unknown."""
        ...

    def close(self) -> None: ...
