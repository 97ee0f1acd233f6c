"""Lessons: what a stored reflection teaches, and how well it fits the attempt about to run.

`.openagents/memory/reflections.jsonl` holds two shapes of record: attempt reflections
(no `kind` key) and outcome records (`"kind": "outcome"`). `Lesson.from_record` reads
either from its plain JSON object, so this module depends on no record class; anything
else on a line (another shape, a record with nothing to teach) gives None.

Scoring (`score_lesson`) is deliberately one small function so that a run log can say
why a lesson was chosen. Relevance follows seed 001's order:

    relevance  = TASK_TYPE * same task type (or shared labels)      8
               + TOOLS     * a shared tool or API (reflection/tools.py)   4
               + SIGNATURE * same error signature + FILES * same file     1.5 + 1
               + TEXT      * text similarity                            1
    usefulness = 2 * (helped + 1) / (shown + 2)
    score      = relevance * usefulness

Each tier outweighs everything below it together: a lesson of the same task type ranks
above one that only shares a tool, which ranks above one that only shares words. Text
only refines: lexical similarity counts once the texts share at least TEXT_MIN_WORDS
distinctive words (one shared "release" is no evidence), and grows with their number. The
generic task type "task" (the backlog's default) says nothing and is not matched.

A lesson with no relevance is never returned, however useful it was elsewhere. The
usefulness factor is 1.0 for a lesson never shown, rises towards 2 for one that keeps
being followed by passing attempts and falls towards 0 for one shown many times that
never helped, so lessons that never help fade. Recency breaks ties (`best_lessons`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Protocol

import orjson

from reflection.text import shorten
from reflection.tools import tool_overlap, tools_named

USES = "lesson-uses.jsonl"  # beside reflections.jsonl: each showing of a lesson, and whether it helped
TEXT_CHARS = 600  # a lesson's text: room for an attempt's analysis and suggestion, clipped
RULE_PREFIX = "i should follow this rule:"
OUTCOMES = ("failed", "partial", "success", "decision")

# Relevance weights, in the seed's order (see the module docstring): each tier outweighs
# the sum of those below it.
TASK_TYPE = 8.0
TOOLS = 4.0
SIGNATURE = 1.5
FILES = 1.0
TEXT = 1.0
BASENAME_ONLY = 0.5  # a file of the same name elsewhere counts half
TEXT_MIN_WORDS = 2  # distinctive words both texts must share before text similarity counts
TEXT_FULL_WORDS = 4  # ... and with this many it counts in full
GENERIC_TYPES = frozenset({"", "task"})


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
    tools: tuple[str, ...] = ()  # the tools and APIs it names (reflection/tools.py)
    steps: tuple[str, ...] = ()  # a success procedure's steps: its playbook (reflection/playbook.py)

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
        return cls(*(tuple(v) if isinstance(v, list) else v for v in values))  # labels, files, tools, steps


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
        tools=_tools(obj, text, *_texts(obj, "actionItems")),
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
        tools=_tools(obj, text, context, rule or "", *_texts(obj, "procedure")),
        steps=_texts(obj, "procedure") if outcome == "success" else (),
    )


def _tools(obj: dict[str, Any], *texts: str) -> tuple[str, ...]:
    """The record's own `tools` key, then what its texts name."""
    named = tools_named("\n".join(texts))
    return tuple(dict.fromkeys((*(t.lower() for t in _texts(obj, "tools")), *named)))


@dataclass(frozen=True)
class LessonQuery:
    """What the attempt about to run is about."""

    text: str
    task_type: str | None = None
    labels: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    error_signatures: tuple[str, ...] = ()
    exclude_task_id: str | None = None  # the asking task: its own lessons are in its retries already
    tools: tuple[str, ...] | None = None  # None: the tools and APIs `text` names
    by_person: bool = False  # `memory search`: any shared word counts, more rank higher

    def __post_init__(self) -> None:
        if self.tools is None:
            object.__setattr__(self, "tools", tools_named(self.text))


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
    lexical: bool = True,
) -> RankedLesson | None:
    """The lesson's score for `query`, or None when it is not relevant or not allowed.

    `text_similarity` is in [0, 1]: bm25 relative to the best candidate (`lexical`), or a
    cosine of embeddings, which needs no shared word and is taken as it is.
    """
    if query.exclude_task_id is not None and lesson.task_id == query.exclude_task_id:
        return None
    labels = label_overlap(lesson.labels, query.labels)  # the user's own kinds of task
    task_type = max(same_task_type(lesson.task_type, query.task_type), labels)
    tools = tool_overlap(lesson.tools, query.tools or ())
    files = file_overlap(lesson.files, query.files)
    signature = float(bool(lesson.error_signature) and lesson.error_signature in query.error_signatures)
    asked = query_stems(query.text)
    words = shared_count(lesson.search_text, asked) if lexical and text_similarity > 0 else 0
    text = min(max(text_similarity, 0.0), 1.0) * (word_weight(words, len(asked), any_word=query.by_person)
                                                   if lexical else 1.0)
    relevance = TASK_TYPE * task_type + TOOLS * tools + SIGNATURE * signature + FILES * files + TEXT * text
    if relevance <= 0.0:
        return None
    factor = usefulness(shown, helped)
    created = created_timestamp(lesson)
    age_days = round(((now or datetime.now(UTC)).timestamp() - created) / 86400, 1) if created else None
    why = {
        "task_type": round(task_type, 4),
        "labels": round(labels, 4),
        "tools": tools,
        "signature": signature,
        "files": files,
        "text": round(text, 4),
        "shared_words": words if lexical else None,
        "relevance": round(relevance, 4),
        "shown": shown,
        "helped": helped,
        "usefulness": round(factor, 4),
        "age_days": age_days,
    }
    return RankedLesson(lesson=lesson, score=relevance * factor, why=why)


def same_task_type(lesson_type: str | None, query_type: str | None) -> float:
    """1.0 for the same specific task type; the generic "task" matches nothing."""
    wanted = (query_type or "").strip().lower()
    return float(wanted not in GENERIC_TYPES and (lesson_type or "").strip().lower() == wanted)


def word_weight(shared: int, asked: int, *, any_word: bool = False) -> float:
    """How much text similarity counts when the texts share `shared` of the `asked`
    distinctive words of the query: nothing below TEXT_MIN_WORDS (one word of a query of
    one or two), in full from TEXT_FULL_WORDS (or all of them). A person searching
    (`any_word`) finds a lesson by any one word; more shared words rank it higher."""
    least = 1 if any_word else min(TEXT_MIN_WORDS, max(1, asked - 1))
    if asked == 0 or shared < least:
        return 0.0
    return min(1.0, shared / min(TEXT_FULL_WORDS, asked))


# Words of any coding task: shared by a lesson and a task, they say nothing about either.
_COMMON_WORDS = """the and for with that this from into when then than are was were been being have has had not
    but all any can could should would will shall may might must its our your their there here what which who
    why how use used using also only just more most some such each other very too does did done make made get
    got out off over under again once about after before while where them they you these those because
    instead new old add added adds fix fixed fixes fixing change changed changes update updated updates file
    files code test tests task tasks run runs ran work works worked make sure first last one two time step
    steps value values return returns function method class module line lines error errors fail failed fails
    failure attempt attempts pass passed passes check checks"""
_COMMON = frozenset(_COMMON_WORDS.split())
_WORD = re.compile(r"[^\W_]+")
_SUFFIXES = ("ing", "ed", "es", "s", "e")


@lru_cache(maxsize=64)
def query_stems(text: str) -> frozenset[str]:
    """`stems` of a query, worked out once for all the candidates it is scored against."""
    return frozenset(stems(text))


@lru_cache(maxsize=64)
def _prefixes(asked: frozenset[str]) -> frozenset[str]:
    return frozenset(stem[:3] for stem in asked)


def shared_count(text: str, asked: frozenset[str]) -> int:
    """How many of the query's `stems` `text` holds. Only a word that starts like one of
    them is stemmed: a candidate's text is read once per query, and most of its words
    cannot match."""
    prefixes = _prefixes(asked)
    found = set()
    for word in _words(text):
        if word[:3] in prefixes:
            stem = _stem(word)
            if stem in asked:
                found.add(stem)
    return len(found)


@lru_cache(maxsize=4096)  # a long run ranks the same lessons for task after task
def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in _COMMON)


def stems(text: str) -> set[str]:
    """The distinctive words of a text: 3+ letters, no common word, crudely stemmed."""
    return {_stem(w) for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in _COMMON}


def _stem(word: str) -> str:
    """"releases", "released", "release" -> "releas": enough to match a word's forms."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


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
