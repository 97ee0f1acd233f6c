"""The Reflect skill (seed ADR-013): a conversation scored on weighted criteria, with insights.

`reflect_on_conversation(request, criteria=..., threshold=...)` redacts the conversation
first, then reads facts out of it (reflection/reflect_facts.py: the files written, not
those only read; the code written, read by reflection/reflect_code.py; the tests added
or changed; tools used, error patterns, whether the last assistant turn claims
completion or an error is left standing) and scores each criterion from them with one
sentence of reasoning. A criterion those facts cannot judge is unknown: its score is
null, its reasoning says so, and the success score is the weighted mean of the others.
With a model, one judge call (`reflection.pattern.judge`) scores the criteria instead; a
criterion the model did not score keeps its heuristic score, and `source` says which
one spoke.

The request and result are the REST API's JSON bodies (camelCase); nothing here knows
about HTTP.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field
from pydantic.alias_generators import to_camel

from reflection.llm import ChatModel
from reflection.pattern.criteria import QualityCriterion
from reflection.pattern.evaluation import CriterionScore, weighted_score
from reflection.pattern.judge import Judged, judge_with_model
from reflection.redact import redact
from reflection.reflect_facts import ConversationFacts, Turn, facts_of, unique
from reflection.schema import CamelModel
from reflection.text import english_list, one_line

Role = Literal["user", "assistant", "system", "tool"]
Source = Literal["heuristic", "llm"]

MAX_MESSAGES = 2_000
MAX_CONTENT_CHARS = 200_000  # one message; the body limit of the server caps the whole


class Message(CamelModel):
    """One turn; `name` is the tool's name on a `tool` turn, when the caller knows it."""

    role: Role
    content: str = Field(max_length=MAX_CONTENT_CHARS)
    name: str | None = Field(default=None, max_length=200)


class ReflectRequest(CamelModel):
    """POST /api/skills/reflect."""

    # A misspelt field (maxInsight) would otherwise be dropped without a word. A turn keeps
    # extra keys (tool_call_id and the like), which clients send and nothing here reads.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    project_path: str = Field(min_length=1, max_length=4096)
    session_id: str = Field(min_length=1, max_length=200)
    conversation: list[Message] = Field(min_length=1, max_length=MAX_MESSAGES)
    task_description: str = Field(default="", max_length=20_000)
    max_insights: int = Field(default=5, ge=1, le=20, strict=True)  # not true, 5.0 or "5"


class CriterionResult(CamelModel):
    """One criterion's score; null when it cannot be judged without a model (`reasoning` says why)."""

    name: str
    score: float | None = Field(ge=0.0, le=1.0)
    reasoning: str


class ReflectResult(CamelModel):
    """What one reflection found; one line of the project's reflect history."""

    reflection_id: str
    session_id: str
    success_score: float = Field(ge=0.0, le=1.0)
    # The share of the criteria's weight that could be judged: a score made of few judged
    # criteria says little, so below MIN_CONFIDENCE a reflection is never satisfactory.
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    criterion_scores: list[CriterionResult]
    insights: list[str]
    improvements: list[str]
    strengths: list[str]
    suggested_actions: list[str]
    timestamp: str  # ISO 8601, UTC, milliseconds
    duration: int  # milliseconds
    satisfactory: bool
    source: Source

    def to_dict(self) -> dict[str, Any]:
        """As stored: an unknown score is written as null, not left out."""
        return self.model_dump(mode="json", by_alias=True)


# -- facts into scores --------------------------------------------------------------------
# A rule returns a score in 0..1, or None when the criterion cannot be judged without a
# model; its sentence then says why, and the score stays unknown (null) instead of invented.

Judgement = tuple[float | None, str]


def _task_completion(f: ConversationFacts) -> Judgement:
    if not f.assistant_turns:
        return 0.1, "The assistant never answered, so nothing was done."
    if f.unresolved_error:
        return 0.3, "An error was still standing when the conversation ended."
    if f.claims_done and f.tests_passing:
        return 0.95, "The assistant reports the task done and the last tests passed."
    if f.claims_done:
        return 0.8, "The assistant reports the task done, without passing tests to confirm it."
    return 0.5, "The conversation ends without a claim that the task is done."


def _code_quality(f: ConversationFacts) -> Judgement:
    code = f.code
    if not code.lines:
        return None, ("None of the code the conversation changed can be read here (no diff, code block or "
                      "written file content), so code quality cannot be judged without a model.")
    problems = code.problems
    score = 0.9 - 0.35 * bool(code.syntax_errors) - 0.15 * len(problems[len(code.syntax_errors):])
    where = f" of {english_list(list(code.files[:3]))}" if code.files else ""
    if not problems:
        return score, (f"Read {_count(code.lines, 'changed line')}{where}: it parses, with no swallowed errors, "
                       "long functions, deep nesting or leftovers.")
    return max(0.1, score), f"Read {_count(code.lines, 'changed line')}{where}: {'; '.join(problems)}."


def _error_handling(f: ConversationFacts) -> Judgement:
    code = f.code
    if code.swallowed:
        return 0.3, f"The changed code drops errors without a word ({_count(code.swallowed, 'handler')})."
    if f.unresolved_error:
        return 0.3, f"{_count(len(f.errors), 'error pattern')} met and at least one left unresolved."
    if code.raises_with_message or code.named_catches:
        how = "raises errors with a message" if code.raises_with_message else "catches named exceptions"
        return 0.85, f"The changed code {how}."
    if f.errors:
        return 0.75, f"{_count(len(f.errors), 'error pattern')} met during the work and resolved before the end."
    return None, ("Neither error paths in the changed code nor errors during the work were seen, so error "
                  "handling cannot be judged without a model.")


def _test_coverage(f: ConversationFacts) -> Judgement:
    added, files = f.writes.tests_added, f.writes.test_files
    if added or files:
        what = (f"{_count(len(added), 'test')} added or changed ({english_list(list(added[:3]))})" if added
                else f"{_count(len(files), 'test file')} written ({english_list(list(files[:3]))})")
        if f.tests_passing:
            return 0.9, f"{what}, and the last test run passes."
        if f.tests_run:
            return 0.5, f"{what}, but the last test run fails."
        return 0.65, f"{what}, but no test run was seen."
    if not f.writes.written and not f.code.lines and (f.claims_done or f.tests_passing):
        ran = " Tests were run and pass." if f.tests_passing else ""
        return None, ("The work is reported done but no file write was seen, so whether tests were added or "
                      f"changed cannot be told without a model.{ran}")
    if f.tests_passing:
        return 0.5, "Existing tests pass, but no test was added or changed for the change."
    if f.tests_run:
        return 0.3, "Tests were run and still fail, and none was added or changed."
    return 0.2, "No tests were run or added."


_RULES = {
    "task_completion": _task_completion,
    "code_quality": _code_quality,
    "error_handling": _error_handling,
    "test_coverage": _test_coverage,
}
HEURISTIC_CRITERIA = frozenset(_RULES)

_IMPROVEMENTS = {
    "task_completion": "Finish the task and confirm it with a passing check",
    "code_quality": "Improve code structure",
    "error_handling": "Add more comprehensive error handling",
    "test_coverage": "Add tests that cover the change",
}
_STRENGTHS = {
    "task_completion": "Task was completed",
    "code_quality": "Code changes went in cleanly",
    "error_handling": "Errors were handled",
    "test_coverage": "Test coverage is good",
}


def heuristic_scores(facts: ConversationFacts, criteria: Sequence[QualityCriterion]) -> list[CriterionResult]:
    """One result per criterion; a criterion without a rule, or one its rule cannot judge,
    is unknown (score None) and says why."""
    results = []
    for criterion in criteria:
        rule = _RULES.get(criterion.name)
        score, why = rule(facts) if rule else (None, f"No rule judges {criterion.name} without a model.")
        results.append(CriterionResult(name=criterion.name, score=None if score is None else round(score, 4),
                                       reasoning=why))
    return results


def insights_of(facts: ConversationFacts) -> list[str]:
    found = []
    if facts.files:
        found.append(f"Modified {_count(len(facts.files), 'file')}")
    if facts.tools:
        found.append("Used 1 tool" if len(facts.tools) == 1 else f"Used {len(facts.tools)} different tools")
    if facts.errors:
        found.append(f"Encountered {_count(len(facts.errors), 'error pattern')}: {', '.join(facts.errors[:3])}")
    if facts.writes.tests_added:
        found.append(f"Added or changed {_count(len(facts.writes.tests_added), 'test')}")
    if facts.tests_run:
        found.append("Tests were run and pass" if facts.tests_passing else "Tests were run and fail")
    if facts.unresolved_error:
        found.append("An error was left unresolved at the end")
    elif facts.claims_done:
        found.append("The last assistant turn claims completion")
    return found


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


# -- the skill ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RedactedTurn:
    """A turn as the heuristic and a judge read it; a plain record, since what it holds
    was validated as a `Message` already."""

    role: str
    content: str
    name: str | None


@dataclass(frozen=True)
class Reflected:
    """A reflection with what it was read from: the facts and the (redacted) task, which the
    project's memory keeps as a lesson (reflection/reflect_memory.py)."""

    result: ReflectResult
    facts: ConversationFacts
    task: str
    weak: tuple[str, ...] = ()  # the criteria judged below their threshold


async def reflect_on_conversation(
    request: ReflectRequest,
    *,
    criteria: Sequence[QualityCriterion],
    threshold: float,
    model: ChatModel | None = None,
) -> ReflectResult:
    """Score a conversation on `criteria`; the model's judgement where it gave one."""
    return (await reflect_and_read(request, criteria=criteria, threshold=threshold, model=model)).result


async def reflect_and_read(
    request: ReflectRequest,
    *,
    criteria: Sequence[QualityCriterion],
    threshold: float,
    model: ChatModel | None = None,
) -> Reflected:
    """`reflect_on_conversation`, keeping the facts the result was made of."""
    started = time.perf_counter()
    # Secrets go before anything reads the conversation: the heuristic, a model, the store.
    # A turn's fields are its role (one of four words), its content and its tool's name.
    conversation = [RedactedTurn(m.role, redact(m.content), m.name and redact(m.name)) for m in request.conversation]
    task = redact(request.task_description)
    facts = facts_of(conversation)
    scores = heuristic_scores(facts, criteria)
    judged = await _judge(model, criteria, conversation, task) if model is not None else None
    if judged is not None:
        scores = _merged(scores, judged)
    limits = {c.name: c.threshold for c in criteria}
    weak = tuple(s.name for s in _known(scores) if s.score < limits.get(s.name, threshold))
    return Reflected(_result(request, facts, scores, judged, criteria, threshold, started), facts, task, weak)


async def _judge(
    model: ChatModel, criteria: Sequence[QualityCriterion], conversation: Sequence[Turn], task: str
) -> Judged | None:
    judgeable = [c for c in criteria if c.evaluator == "llm"]
    judged = await judge_with_model(model, judgeable, transcript(conversation), task=task)
    return judged if judged is not None and judged.scores else None


def transcript(conversation: Sequence[Turn]) -> str:
    """The conversation as the judge reads it: one block per turn."""
    return "\n\n".join(f"[{m.role}{':' + m.name if m.name else ''}]\n{m.content}" for m in conversation)


def _merged(heuristic: list[CriterionResult], judged: Judged) -> list[CriterionResult]:
    """The model's score where it gave one (an unknown included), else the heuristic's."""
    by_model = {s.name: CriterionResult(name=s.name, score=round(s.score, 4), reasoning=s.reasoning)
                for s in judged.scores}
    return [by_model.get(s.name, s) for s in heuristic]


def _known(scores: Sequence[CriterionResult]) -> list[CriterionScore]:
    """The scores that were judged, for the weighted mean: an unknown one counts for nothing."""
    return [CriterionScore(s.name, s.score, s.reasoning) for s in scores if s.score is not None]


def _result(
    request: ReflectRequest,
    facts: ConversationFacts,
    scores: list[CriterionResult],
    judged: Judged | None,
    criteria: Sequence[QualityCriterion],
    threshold: float,
    started: float,
) -> ReflectResult:
    cap = request.max_insights
    limits = {c.name: c.threshold for c in criteria}
    known = _known(scores)
    weak = [s for s in known if s.score < limits.get(s.name, threshold)]
    strong = [s for s in known if s not in weak]
    improvements = _clean(judged.suggestions or judged.issues if judged else [])
    improvements = improvements or [_IMPROVEMENTS.get(s.name, f"Improve {s.name.replace('_', ' ')}") for s in weak]
    strengths = _clean(judged.strengths if judged else []) or [_strength(s.name) for s in strong]
    overall = round(weighted_score(known, criteria), 4)  # over the criteria judged; none: 0
    confidence = round(_judged_share(scores, criteria), 4)
    return ReflectResult(
        reflection_id=f"reflect-{time.time_ns() // 1_000_000}-{secrets.token_hex(3)}",
        session_id=redact(request.session_id),
        success_score=overall,
        confidence=confidence,
        criterion_scores=scores,
        insights=_insights(insights_of(facts), _clean(judged.issues if judged else []), cap),
        improvements=improvements[:cap],
        strengths=strengths[:cap],
        suggested_actions=[f"Address: {item}" for item in improvements[:cap]],
        timestamp=datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        duration=round((time.perf_counter() - started) * 1000),
        satisfactory=overall >= threshold and confidence >= MIN_CONFIDENCE,
        source="llm" if judged is not None else "heuristic",
    )


MIN_CONFIDENCE = 0.5  # more than half the weight unjudged: the score is not trusted


def _judged_share(scores: Sequence[CriterionResult], criteria: Sequence[QualityCriterion]) -> float:
    """The share of the criteria's weight whose score is known (1.0 when all are)."""
    weights = {c.name: c.weight for c in criteria}
    total = sum(weights.get(s.name, 0.0) for s in scores)
    judged = sum(weights.get(s.name, 0.0) for s in scores if s.score is not None)
    return judged / total if total else 0.0


def _insights(facts: list[str], issues: list[str], cap: int) -> list[str]:
    """The heuristic's observations, leaving room for the model's issues within `cap`."""
    return (facts[: max(1, cap - len(issues))] + issues)[:cap]


def _strength(name: str) -> str:
    return _STRENGTHS.get(name, f"{name.replace('_', ' ').capitalize()} is good")


def _clean(items: Iterable[str]) -> list[str]:
    """A model's list items as one redacted line each, duplicates dropped."""
    return list(unique(one_line(redact(item), 300) for item in items if item.strip()))
