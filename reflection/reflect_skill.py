"""The Reflect skill (seed ADR-013): a conversation scored on weighted criteria, with insights.

`reflect_on_conversation(request, criteria=..., threshold=...)` redacts the conversation
first, then reads facts out of it (files named, tools used, error patterns, tests run or
added, whether the last assistant turn claims completion or an error is left standing)
and scores each criterion from them with one sentence of reasoning. With a model, one
judge call (`reflection.pattern.judge`) scores the criteria instead; a criterion the
model did not score keeps its heuristic score, and `source` says which one spoke.

The request and result are the REST API's JSON bodies (camelCase); nothing here knows
about HTTP.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import ConfigDict, Field
from pydantic.alias_generators import to_camel

from reflection.llm import ChatModel
from reflection.pattern.criteria import QualityCriterion
from reflection.pattern.evaluation import CriterionScore, weighted_score
from reflection.pattern.judge import Judged, judge_with_model
from reflection.redact import redact
from reflection.schema import CamelModel
from reflection.text import one_line

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
    name: str
    score: float = Field(ge=0.0, le=1.0)
    reasoning: str


class ReflectResult(CamelModel):
    """What one reflection found; one line of the project's reflect history."""

    reflection_id: str
    session_id: str
    success_score: float = Field(ge=0.0, le=1.0)
    criterion_scores: list[CriterionResult]
    insights: list[str]
    improvements: list[str]
    strengths: list[str]
    suggested_actions: list[str]
    timestamp: str  # ISO 8601, UTC, milliseconds
    duration: int  # milliseconds
    satisfactory: bool
    source: Source


# -- what a conversation shows ------------------------------------------------------------

_EXTENSIONS = (
    "py|pyi|ts|tsx|js|jsx|mjs|cjs|go|rs|java|kt|rb|php|c|h|cc|cpp|hpp|cs|swift|scala|sh|sql"
    "|md|rst|txt|json|ya?ml|toml|ini|cfg|html|css|scss|vue|svelte|lock"
)
_PATH = re.compile(rf"(?<![\w/.:@-])((?:[\w.-]+/)*[\w-][\w.-]*\.(?:{_EXTENSIONS}))(?![\w/-])")
_TEST_FILE = re.compile(r"(?:^|/)(?:tests?/|test_[\w-]+\.|[\w-]+_test\.|[\w.-]+\.(?:test|spec)\.)")
_TOOL_PREFIX = re.compile(r"^\s*\[?([A-Za-z][\w-]{1,40})\]?:")
_ERRORS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("traceback", re.compile(r"Traceback \(most recent call last\)")),
    ("failing tests", re.compile(r"\bFAILED\b|\b[1-9]\d* failed\b|\bFAIL\b|\btests? failed\b", re.IGNORECASE)),
    ("type errors", re.compile(r"\berror TS\d+|\berror: Incompatible types|\btypecheck failed", re.IGNORECASE)),
    ("build errors", re.compile(r"\bnpm ERR!|\bcompilation failed|\berror\[E\d+\]|\bbuild failed", re.IGNORECASE)),
)
_NAMED_ERROR = re.compile(r"\b([A-Z]\w*(?:Error|Exception))\b|(?<![\w-])(Error):")
_TEST_RUN = re.compile(
    r"\b(?:pytest|unittest|npm (?:run )?test|yarn test|pnpm test|go test|cargo test|jest|vitest|mocha"
    r"|test session starts|\d+ (?:passed|failed)|Ran \d+ tests?)\b",
    re.IGNORECASE,
)
_PASSING = re.compile(r"\b\d+ passed\b(?!.*\b[1-9]\d* failed\b)|\ball (?:\d+ )?tests? pass|\bOK \(|\bPASS\b",
                      re.IGNORECASE | re.DOTALL)
_DONE = re.compile(
    r"\b(?:done|completed?|implemented|finished|fixed|resolved|all tests pass(?:ed|ing)?|works now|is working)\b",
    re.IGNORECASE,
)
_NOT_DONE = re.compile(
    r"\b(?:unable to|could not|couldn't|not yet|still (?:fail|broken|error)\w*|blocked|gave up|failed to)\b",
    re.IGNORECASE,
)
_HANDLING = re.compile(r"\b(?:try:|except\b|catch\s*\(|raise\b|throw new|error handling|validat\w+)", re.IGNORECASE)
# Lower-case words without one of which a pattern cannot match: a substring test is far
# cheaper than a case-insensitive regex scan, and most turns hold none of them.
_ERROR_WORDS = ("traceback", "fail", "error", "npm err", "exception")  # _ERRORS and _NAMED_ERROR
_TEST_RUN_WORDS = ("test", "jest", "mocha", "passed", "failed")
_PASSING_WORDS = ("pass", "ok (")
_HANDLING_WORDS = ("try:", "except", "catch", "raise", "throw new", "error handling", "validat")


def _may(text: str, words: tuple[str, ...]) -> bool:
    lowered = text.lower()
    return any(word in lowered for word in words)


@dataclass(frozen=True)
class ConversationFacts:
    """What the heuristic read out of a (redacted) conversation."""

    files: tuple[str, ...]
    tools: tuple[str, ...]
    errors: tuple[str, ...]  # distinct error patterns, in the order met
    tests_run: bool
    tests_added: bool
    tests_passing: bool  # the last test output seen passes
    claims_done: bool
    unresolved_error: bool
    handles_errors: bool
    assistant_turns: int


def facts_of(conversation: Sequence[Message]) -> ConversationFacts:
    """The heuristic's reading of a conversation (already redacted)."""
    worked = [m for m in conversation if m.role in ("assistant", "tool")]
    files = _unique(path for m in worked for path in _PATH.findall(m.content) if "://" not in path)
    last_error, last_pass, last_test = -1, -1, None
    errors: list[str] = []
    for index, message in enumerate(worked):
        found = _error_patterns(message.content)
        errors.extend(found)
        last_error = index if found else last_error
        if not found and (_passing(message.content) or _claims_done(message)):
            last_pass = index  # a pass, or the assistant saying it fixed what came before
        if _may(message.content, _TEST_RUN_WORDS) and _TEST_RUN.search(message.content):
            last_test = message.content
    assistant = [m for m in conversation if m.role == "assistant"]
    closing = assistant[-1].content if assistant else ""
    return ConversationFacts(
        files=files,
        tools=_unique(_tool_name(m) for m in conversation if m.role == "tool"),
        errors=_unique(errors),
        tests_run=last_test is not None,
        tests_added=any(_TEST_FILE.search(f) for f in files),
        tests_passing=last_test is not None and _passing(last_test) and not _error_patterns(last_test),
        claims_done=bool(assistant) and _claims_done(assistant[-1]),
        unresolved_error=last_error > last_pass or bool(_NOT_DONE.search(closing)),
        handles_errors=any(_may(m.content, _HANDLING_WORDS) and _HANDLING.search(m.content) for m in worked),
        assistant_turns=len(assistant),
    )


def _claims_done(message: Message) -> bool:
    return message.role == "assistant" and bool(_DONE.search(message.content)) and not _NOT_DONE.search(message.content)


def _passing(text: str) -> bool:
    return _may(text, _PASSING_WORDS) and bool(_PASSING.search(text))


def _error_patterns(text: str) -> list[str]:
    """The error kinds in one message: families (tracebacks, failing tests) and named errors."""
    if not _may(text, _ERROR_WORDS):
        return []
    found = [kind for kind, pattern in _ERRORS if pattern.search(text)]
    named = _unique(a or b for a, b in _NAMED_ERROR.findall(text))
    # A bare "Error:" says less than the named error beside it.
    return found + [n for n in named if n != "Error" or len(named) == 1]


def _tool_name(message: Message) -> str:
    if message.name and message.name.strip():
        return message.name.strip()
    prefix = _TOOL_PREFIX.match(message.content)
    return prefix.group(1) if prefix else "tool"


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


# -- facts into scores --------------------------------------------------------------------


def _task_completion(f: ConversationFacts) -> tuple[float, str]:
    if not f.assistant_turns:
        return 0.1, "The assistant never answered, so nothing was done."
    if f.unresolved_error:
        return 0.3, "An error was still standing when the conversation ended."
    if f.claims_done and f.tests_passing:
        return 0.95, "The assistant reports the task done and the last tests passed."
    if f.claims_done:
        return 0.8, "The assistant reports the task done, without passing tests to confirm it."
    return 0.5, "The conversation ends without a claim that the task is done."


def _code_quality(f: ConversationFacts) -> tuple[float, str]:
    if not f.files:
        return 0.5, "No changed file was named, so the code itself could not be judged."
    score = 0.8 - 0.1 * min(len(f.errors), 3) - (0.1 if f.unresolved_error else 0.0)
    changed = _count(len(f.files), "file")
    if f.errors:
        return score, f"{changed} changed with {_count(len(f.errors), 'error pattern')} on the way."
    return score, f"{changed} changed without errors along the way."


def _error_handling(f: ConversationFacts) -> tuple[float, str]:
    if f.unresolved_error:
        return 0.3, f"{_count(len(f.errors), 'error pattern')} met and at least one left unresolved."
    if f.errors:
        return 0.75, f"{_count(len(f.errors), 'error pattern')} met and resolved before the end."
    if f.handles_errors:
        return 0.8, "No errors occurred and the work mentions handling or validating them."
    return 0.6, "No errors occurred, and error handling was not discussed."


def _test_coverage(f: ConversationFacts) -> tuple[float, str]:
    if f.tests_added and f.tests_passing:
        return 0.9, "Tests were added or changed, and they pass."
    if f.tests_added:
        return 0.65, "Tests were added or changed, but no passing run was seen."
    if f.tests_passing:
        return 0.7, "Existing tests were run and pass, but none were added."
    if f.tests_run:
        return 0.4, "Tests were run and still fail."
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


def heuristic_scores(facts: ConversationFacts, criteria: Sequence[QualityCriterion]) -> list[CriterionScore]:
    """One score per criterion; a criterion without a rule gets a neutral 0.5 and says so."""
    scores = []
    for criterion in criteria:
        rule = _RULES.get(criterion.name)
        score, why = rule(facts) if rule else (0.5, f"The heuristic has no rule for {criterion.name}.")
        scores.append(CriterionScore(criterion.name, round(score, 4), why, evaluator="heuristic"))
    return scores


def insights_of(facts: ConversationFacts) -> list[str]:
    found = []
    if facts.files:
        found.append(f"Modified {_count(len(facts.files), 'file')}")
    if facts.tools:
        found.append("Used 1 tool" if len(facts.tools) == 1 else f"Used {len(facts.tools)} different tools")
    if facts.errors:
        found.append(f"Encountered {_count(len(facts.errors), 'error pattern')}: {', '.join(facts.errors[:3])}")
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


async def reflect_on_conversation(
    request: ReflectRequest,
    *,
    criteria: Sequence[QualityCriterion],
    threshold: float,
    model: ChatModel | None = None,
) -> ReflectResult:
    """Score a conversation on `criteria`; the model's judgement where it gave one."""
    started = time.perf_counter()
    # Secrets go before anything reads the conversation: the heuristic, a model, the store.
    # A turn's fields are its role (one of four words), its content and its tool's name.
    conversation = [m.model_copy(update={"content": redact(m.content), "name": m.name and redact(m.name)})
                    for m in request.conversation]
    task = redact(request.task_description)
    facts = facts_of(conversation)
    scores = heuristic_scores(facts, criteria)
    judged = await _judge(model, criteria, conversation, task) if model is not None else None
    if judged is not None:
        scores = _merged(scores, judged)
    return _result(request, facts, scores, judged, criteria, threshold, started)


async def _judge(
    model: ChatModel, criteria: Sequence[QualityCriterion], conversation: Sequence[Message], task: str
) -> Judged | None:
    judgeable = [c for c in criteria if c.evaluator == "llm"]
    judged = await judge_with_model(model, judgeable, transcript(conversation), task=task)
    return judged if judged is not None and judged.scores else None


def transcript(conversation: Sequence[Message]) -> str:
    """The conversation as the judge reads it: one block per turn."""
    return "\n\n".join(f"[{m.role}{':' + m.name if m.name else ''}]\n{m.content}" for m in conversation)


def _merged(heuristic: list[CriterionScore], judged: Judged) -> list[CriterionScore]:
    by_model = {s.name: s for s in judged.scores}
    return [by_model.get(s.name, s) for s in heuristic]


def _result(
    request: ReflectRequest,
    facts: ConversationFacts,
    scores: list[CriterionScore],
    judged: Judged | None,
    criteria: Sequence[QualityCriterion],
    threshold: float,
    started: float,
) -> ReflectResult:
    cap = request.max_insights
    limits = {c.name: c.threshold for c in criteria}
    weak = [s for s in scores if s.score < limits.get(s.name, threshold)]
    strong = [s for s in scores if s not in weak]
    improvements = _clean(judged.suggestions or judged.issues if judged else [])
    improvements = improvements or [_IMPROVEMENTS.get(s.name, f"Improve {s.name.replace('_', ' ')}") for s in weak]
    strengths = _clean(judged.strengths if judged else []) or [_strength(s.name) for s in strong]
    overall = round(weighted_score(scores, criteria), 4)
    return ReflectResult(
        reflection_id=f"reflect-{time.time_ns() // 1_000_000}-{secrets.token_hex(3)}",
        session_id=redact(request.session_id),
        success_score=overall,
        criterion_scores=[CriterionResult(name=s.name, score=round(s.score, 4), reasoning=s.reasoning) for s in scores],
        insights=_insights(insights_of(facts), _clean(judged.issues if judged else []), cap),
        improvements=improvements[:cap],
        strengths=strengths[:cap],
        suggested_actions=[f"Address: {item}" for item in improvements[:cap]],
        timestamp=datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        duration=round((time.perf_counter() - started) * 1000),
        satisfactory=overall >= threshold,
        source="llm" if judged is not None else "heuristic",
    )


def _insights(facts: list[str], issues: list[str], cap: int) -> list[str]:
    """The heuristic's observations, leaving room for the model's issues within `cap`."""
    return (facts[: max(1, cap - len(issues))] + issues)[:cap]


def _strength(name: str) -> str:
    return _STRENGTHS.get(name, f"{name.replace('_', ' ').capitalize()} is good")


def _clean(items: Iterable[str]) -> list[str]:
    """A model's list items as one redacted line each, duplicates dropped."""
    return list(_unique(one_line(redact(item), 300) for item in items if item.strip()))
