"""Outcome reflections: what a whole task taught, typed by how it ended.

An attempt `Reflection` explains one failed attempt to the next retry of the same
subtask. An `OutcomeReflection` is written once per task when it ends: "failed" (blocked
with nothing committed), "partial" (blocked after some subtasks, or closed with waived
tests), "success" (a procedure worth replaying) or "decision" (why one path was taken).
They share reflections.jsonl with attempt reflections and differ by their `kind` key.

`outcome_reflections(story)` writes them from what the loop already knows, without a
model call. Every text goes through `fit_text`, so secrets are redacted before anything
is kept. Failures with a systemic cause, and successes after a failure, also carry the
MARS pair: a `principle` ("I should follow this rule: ...") and a `procedure` (steps).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field

from reflection.redact import redact
from reflection.schema import (
    ITEM_CHARS,
    TEXT_CHARS,
    FailureCategory,
    Reflection,
    StoredLine,
    fit_text,
    new_id,
    utc_now,
)
from reflection.text import joined_lines
from reflection.tools import tools_named

Outcome = Literal["failed", "partial", "success", "decision"]
SuccessProcedures = Literal["after_failure", "always", "never"]

OUTCOME_KIND = "outcome"  # the `kind` key that sets these lines apart in reflections.jsonl
PRINCIPLE_PREFIX = "I should follow this rule: "
_KEY_ORDER = ("id", "kind", "outcome", "sessionId", "taskId", "agent", "title", "createdAt")


class OutcomeReflection(StoredLine):
    """One outcome line of reflections.jsonl; keys this version does not know are kept."""

    model_config = ConfigDict(extra="allow")
    key_order: ClassVar[tuple[str, ...]] = _KEY_ORDER

    id: str = Field(default_factory=new_id)
    kind: Literal["outcome"] = OUTCOME_KIND
    outcome: Outcome
    session_id: str
    task_id: str
    agent: str
    title: str
    created_at: datetime = Field(default_factory=utc_now)
    task_type: str | None = None
    labels: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    # The libraries, commands, endpoints and services the task named (reflection/tools.py):
    # a later task naming one of them is shown this record before others of its kind.
    tools: list[str] = Field(default_factory=list)
    error_signature: str | None = None
    # failed: all five; partial: what happened, what went wrong, what to do differently
    what_happened: str | None = None
    what_went_wrong: str | None = None
    why_it_went_wrong: str | None = None
    what_to_do_differently: str | None = None
    tactical_rule: str | None = None
    # success
    strategy: str | None = None
    why_it_worked: str | None = None
    # decision
    decision: str | None = None
    alternatives: list[str] | None = None
    why_chosen: str | None = None
    # MARS, only where the cause is systemic or the strategy replicable
    principle: str | None = None
    procedure: list[str] | None = None
    source: Literal["heuristic", "llm"] = "heuristic"
    model: str | None = None  # the model that wrote it (source "llm")
    # The success procedure whose steps the task was offered as a playbook (Record & Replay).
    replayed_from: str | None = None

    def lesson_text(self) -> str:
        """The short text a prompt shows for this record."""
        if self.outcome == "failed":
            parts = [self.what_to_do_differently, _labelled("Rule", self.tactical_rule)]
        elif self.outcome == "partial":
            parts = [self.what_to_do_differently]
        elif self.outcome == "success":
            parts = [self.strategy]
        else:
            parts = [self.decision, _labelled("Why", self.why_chosen)]
        return " ".join(part for part in parts if part)

    def rule(self) -> str | None:
        """The preventive rule this record offers, without the principle's prefix."""
        if self.tactical_rule:
            return self.tactical_rule
        if self.principle:
            return self.principle.removeprefix(PRINCIPLE_PREFIX)
        return None


def is_outcome(obj: Any) -> bool:
    """A parsed JSON line is an outcome record (as opposed to an attempt reflection)."""
    return isinstance(obj, dict) and obj.get("kind") == OUTCOME_KIND


def _labelled(label: str, text: str | None) -> str | None:
    return f"{label}: {text}" if text else None


# -- what the loop knows when a task ends ----------------------------------------------


@dataclass(frozen=True)
class AttemptStory:
    """One attempt of the task, in the order they ran.

    failure_kind: "test_failure", "typecheck_failure", "timeout", "runtime_error", "edit"
    (the reply could not be applied), "integrity" (it edited its tests or config),
    "environment", "no_change", "touched_user_files"; None when it passed.
    """

    number: int
    passed: bool
    summary: str
    failure_kind: str | None
    error_signature: str | None
    files: tuple[str, ...]
    reflection: Reflection | None


@dataclass(frozen=True)
class TaskStory:
    """How one task ended, and every attempt on the way."""

    session_id: str
    task_id: str
    title: str
    description: str
    task_type: str | None
    labels: tuple[str, ...]
    agent: str
    ended: Literal["closed", "blocked"]
    stop_reason: str | None
    reason: str
    subtasks_total: int
    subtasks_done: int
    attempts: tuple[AttemptStory, ...]
    waived: tuple[str, ...] = ()
    replayed_from: str | None = None  # the success procedure offered to it as a playbook

    @property
    def failures(self) -> list[AttemptStory]:
        return [attempt for attempt in self.attempts if not attempt.passed]


# Per failure kind: what it was, why it happens, what to do instead, and the rule.
_WHAT = {
    "test_failure": "the tests failed",
    "typecheck_failure": "the typecheck failed",
    "timeout": "the checks ran out of time",
    "runtime_error": "the code raised an error when it ran",
    "edit": "the reply could not be applied to the files",
    "agent": "the agent's run failed before anything could be checked",
    "integrity": "the attempt edited its own tests or check configuration and was rejected",
    "environment": "the checks could not run in this environment",
    "no_change": "the attempt changed nothing",
    "touched_user_files": "the attempt changed files holding the user's uncommitted work",
}
_WHY = {
    "test_failure": "The code did not do what the tests expect.",
    "typecheck_failure": "The code's types did not agree with the code it calls or is called by.",
    "timeout": "The checks ran past their time limit: the code likely loops, blocks on something that "
    "never comes, or does far more work than needed.",
    "runtime_error": "The code failed when it ran, before the checks could judge its behaviour.",
    "edit": "The reply did not match the files as they are (a wrong path, stale context or a malformed "
    "edit block), so nothing was applied and nothing was checked.",
    "agent": "The agent command exited with an error (see its last output), so its changes were not checked.",
    "integrity": "The attempt tried to make the checks pass by changing the tests or their configuration "
    "instead of the code, which the integrity check refuses.",
    "environment": "The failure came from the environment (a missing tool, module or permission), "
    "not from the code the attempt wrote.",
    "no_change": "The attempt did not produce any edit, so there was nothing to verify.",
    "touched_user_files": "The attempt edited files with the user's uncommitted work, which are off limits.",
}
_ADVICE = {
    "test_failure": "Read the first failing assertion, find the input it uses and fix the code for that "
    "case before touching anything else.",
    "typecheck_failure": "Read the signatures of the functions involved before editing, and keep the "
    "declared types of the code the change touches.",
    "timeout": "Look for an unbounded loop or a wait without a timeout, and keep each check's work small.",
    "edit": "Copy the exact current lines of the file into the edit and name the file by its path in the "
    "repository.",
    "agent": "Read the agent's last output for why it stopped, and make the prompt or its options "
    "give it what it needs to finish.",
    "integrity": "Leave tests and check configuration alone and change the code until the existing "
    "checks pass.",
    "environment": "Check that the tools and modules the checks need are installed before changing code, "
    "and report a missing one instead of retrying.",
    "no_change": "Make a concrete edit to the files the task names.",
    "touched_user_files": "Keep the change to files the task needs and leave the user's modified files "
    "as they are.",
}
_RULE = {
    "test_failure": "Always reproduce the failing test's input and expected result before changing code.",
    "typecheck_failure": "Always check the types a function declares before calling or changing it.",
    "timeout": "Always bound loops and waits, and give every external call a timeout.",
    "runtime_error": "Always run the changed code path once before handing it in.",
    "edit": "Always quote the file's current text exactly when writing an edit.",
    "agent": "Always read why the agent stopped before running it again.",
    "integrity": "Never change tests or check configuration to make checks pass.",
    "environment": "Always confirm the environment can run the checks before blaming the code.",
    "no_change": "Always answer with a concrete edit, never with a plan alone.",
    "touched_user_files": "Never edit files that hold the user's uncommitted work.",
}
_DEFAULT_WHY = "The attempts did not find the cause of the failure."
_DEFAULT_ADVICE = "Find the first error in the output and fix its cause before anything else."
_DEFAULT_RULE = "Always fix the first reported error before the ones that follow from it."

_SYSTEMIC_KINDS = frozenset({"environment", "timeout", "edit", "integrity"})
_SYSTEMIC_CATEGORIES = frozenset(
    {FailureCategory.ENVIRONMENT, FailureCategory.APPROACH_ERROR, FailureCategory.MISCONCEPTION}
)


def outcome_reflections(
    story: TaskStory, *, success_procedures: SuccessProcedures = "after_failure"
) -> list[OutcomeReflection]:
    """The outcome records a task's end calls for (none for a plain first-try pass)."""
    failures = story.failures
    if story.ended == "blocked":
        return [_partial(story) if story.subtasks_done > 0 else _failed(story)]
    if story.waived:  # a pass with failures waived; what finally worked is still worth keeping
        return [_partial(story), *([_success(story)] if failures and success_procedures != "never" else [])]
    if success_procedures == "never":
        return []
    if failures or success_procedures == "always":
        return [_success(story)]
    return []


def decision_reflection(
    *,
    session_id: str,
    task_id: str,
    agent: str,
    title: str,
    decision: str,
    alternatives: Iterable[str],
    why: str,
    task_type: str | None = None,
    labels: Iterable[str] = (),
    files: Iterable[str] = (),
) -> OutcomeReflection:
    """Why one path was taken where several existed (a decomposition, a rollback)."""
    return OutcomeReflection(
        outcome="decision",
        tools=_items(tools_named(redact(title))),
        decision=_prose(_sentence(decision)),
        alternatives=_items(alternatives),
        why_chosen=_prose(_sentence(why)),
        **_identity(session_id, task_id, agent, title, task_type, labels, files),
    )


# -- the records -----------------------------------------------------------------------


def _failed(story: TaskStory) -> OutcomeReflection:
    last = _last_failure(story)
    lesson = _latest_reflection(story.attempts)
    rule = _rule(lesson, last)
    return _record(
        story,
        "failed",
        what_happened=_prose(_what_happened(story)),
        what_went_wrong=_prose(_what_went_wrong(story, last)),
        why_it_went_wrong=_prose(_why(story, lesson, last)),
        what_to_do_differently=_prose(_advice(lesson, last)),
        tactical_rule=_prose(rule),
        **_mars_for_failure(story, lesson, last, rule),
    )


def _partial(story: TaskStory) -> OutcomeReflection:
    last = _last_failure(story)
    lesson = _latest_reflection(story.attempts)
    return _record(
        story,
        "partial",
        what_happened=_prose(_what_happened(story)),
        what_went_wrong=_prose(_partial_wrong(story, last)),
        what_to_do_differently=_prose(_partial_advice(story, lesson, last)),
        **_mars_for_failure(story, lesson, last, _rule(lesson, last)),
    )


def _success(story: TaskStory) -> OutcomeReflection:
    failing = _last_failure(story)
    if failing is None:
        passing = _last_pass(story.attempts)
        return _record(
            story,
            "success",
            strategy=_prose(passing.summary if passing else story.reason),
            why_it_worked=_prose("It passed every check at the first attempt."),
        )
    passing = _first_pass_after(story.attempts, failing)
    lesson = failing.reflection or _latest_reflection(_before(story.attempts, failing))
    rule = _rule(lesson, failing)
    return _record(
        story,
        "success",
        strategy=_prose(_strategy(passing, lesson, failing)),
        why_it_worked=_prose(_why_it_worked(failing, lesson)),
        principle=_prose(PRINCIPLE_PREFIX + rule),
        procedure=_items(_success_steps(failing, passing, lesson)),
    )


def _record(story: TaskStory, outcome: Outcome, **fields: Any) -> OutcomeReflection:
    files = dict.fromkeys(path for attempt in story.attempts for path in attempt.files)
    last = _last_failure(story)
    named = "\n".join([story.title, story.description, *(attempt.summary for attempt in story.attempts)])
    return OutcomeReflection(
        outcome=outcome,
        error_signature=_short(last.error_signature) if last and last.error_signature else None,
        tools=_items(tools_named(redact(named))),
        replayed_from=story.replayed_from,
        **_identity(story.session_id, story.task_id, story.agent, story.title, story.task_type, story.labels, files),
        **fields,
    )


def _identity(
    session_id: str,
    task_id: str,
    agent: str,
    title: str,
    task_type: str | None,
    labels: Iterable[str],
    files: Iterable[str],
) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "task_id": task_id,
        "agent": _short(agent),
        "title": _short(title),
        "task_type": _short(task_type) if task_type else None,
        "labels": _items(labels),
        "files": _items(files),
    }


# -- the words -------------------------------------------------------------------------


def _what_happened(story: TaskStory) -> str:
    tried = len(story.attempts)
    done = f"{story.subtasks_done} of {story.subtasks_total} subtasks were committed"
    ending = "was blocked" if story.ended == "blocked" else "was closed"
    text = f"Task {story.task_id} ({story.title}) {ending} after {tried} attempt{'s' * (tried != 1)}; {done}."
    if story.waived:
        text += f" Waived tests: {', '.join(story.waived)}."
    if story.reason:
        text += f" Reason: {_sentence(story.reason)}"
    if story.stop_reason:
        text += f" Retrying stopped: {story.stop_reason}."
    return text


def _what_went_wrong(story: TaskStory, last: AttemptStory | None) -> str:
    if last is None:
        return _sentence(story.reason or "The task stopped before any attempt ran")
    what = _WHAT.get(last.failure_kind or "", "the attempt failed")
    text = f"Attempt {last.number}: {what}. {_sentence(last.summary)}"
    repeats = _repeated_numbers(story, last)
    if repeats:
        numbers = ", ".join(str(n) for n in repeats)
        text += f" The same error ({last.error_signature}) came back in attempts {numbers}."
    return text


def _why(story: TaskStory, lesson: Reflection | None, last: AttemptStory | None) -> str:
    why = lesson.analysis if lesson else _WHY.get(_kind(last), _DEFAULT_WHY)
    if last and _repeated_numbers(story, last):
        why += " The retries repeated one approach instead of changing it."
    return why


def _advice(lesson: Reflection | None, last: AttemptStory | None) -> str:
    return lesson.suggestion if lesson else _ADVICE.get(_kind(last), _DEFAULT_ADVICE)


def _rule(lesson: Reflection | None, last: AttemptStory | None) -> str:
    if lesson and lesson.action_items:
        return _sentence(lesson.action_items[0])
    return _RULE.get(_kind(last), _DEFAULT_RULE)


def _partial_wrong(story: TaskStory, last: AttemptStory | None) -> str:
    if story.ended == "closed":
        return f"The task closed with these tests waived instead of passing: {', '.join(story.waived)}."
    return _what_went_wrong(story, last)


def _partial_advice(story: TaskStory, lesson: Reflection | None, last: AttemptStory | None) -> str:
    if story.ended == "closed":
        return "Make the waived tests pass, or fix them in a task of their own, rather than leave them waived."
    return _advice(lesson, last)


def _strategy(passing: AttemptStory | None, lesson: Reflection | None, failing: AttemptStory) -> str:
    number = passing.number if passing else failing.number + 1
    did = _sentence(passing.summary) if passing and passing.summary else ""
    # What the passing attempt did comes first: it is the concrete part, and survives a clip.
    if lesson:
        return f"Attempt {number}, {did} It followed the lesson of attempt {failing.number}: " \
               f"{_sentence(lesson.suggestion)}"
    return f"Attempt {number}, {did} It changed course after attempt {failing.number} failed."


def _why_it_worked(failing: AttemptStory, lesson: Reflection | None) -> str:
    what = _WHAT.get(_kind(failing), "it failed")
    text = f"It overcame the failure of attempt {failing.number}, where {what}: {_sentence(failing.summary)}"
    if lesson:
        text += f" The cause was found first: {_sentence(lesson.analysis)}"
    return text


def _success_steps(failing: AttemptStory, passing: AttemptStory | None, lesson: Reflection | None) -> list[str]:
    what = _WHAT.get(_kind(failing), "the attempt failed")
    steps = [f"Read the failure of attempt {failing.number}, where {what}: {_sentence(failing.summary)}"]
    if lesson:
        steps.append(f"Name its cause: {_sentence(lesson.analysis)}")
        steps.extend(_sentence(item) for item in lesson.action_items)
        steps.append(f"Change course: {_sentence(lesson.suggestion)}")
    else:
        steps.append(_ADVICE.get(_kind(failing), _DEFAULT_ADVICE))
    number = passing.number if passing else failing.number + 1
    steps.append(f"Run the typecheck and the tests again; they passed at attempt {number}.")
    return steps


def _mars_for_failure(
    story: TaskStory, lesson: Reflection | None, last: AttemptStory | None, rule: str
) -> dict[str, Any]:
    """Principle and procedure, only when the cause would strike again (MARS)."""
    if not _systemic(story, lesson, last):
        return {}
    steps = list(lesson.action_items) if lesson else []
    steps.append(_advice(lesson, last))
    steps.append("Run the typecheck and the tests and read their first error before retrying.")
    return {"principle": _prose(PRINCIPLE_PREFIX + rule), "procedure": _items(_sentence(s) for s in steps)}


def _systemic(story: TaskStory, lesson: Reflection | None, last: AttemptStory | None) -> bool:
    if lesson and lesson.category in _SYSTEMIC_CATEGORIES:
        return True
    if last and (_kind(last) in _SYSTEMIC_KINDS or _repeated_numbers(story, last)):
        return True
    return False


# -- reading the story -----------------------------------------------------------------


def _kind(attempt: AttemptStory | None) -> str:
    return (attempt.failure_kind or "") if attempt else ""


def _last_failure(story: TaskStory) -> AttemptStory | None:
    failures = story.failures
    return failures[-1] if failures else None


def _last_pass(attempts: Iterable[AttemptStory]) -> AttemptStory | None:
    passes = [attempt for attempt in attempts if attempt.passed]
    return passes[-1] if passes else None


def _before(attempts: tuple[AttemptStory, ...], attempt: AttemptStory) -> tuple[AttemptStory, ...]:
    return attempts[: attempts.index(attempt)]


def _first_pass_after(attempts: tuple[AttemptStory, ...], attempt: AttemptStory) -> AttemptStory | None:
    later = attempts[attempts.index(attempt) + 1 :]
    return next((a for a in later if a.passed), None) or _last_pass(attempts)


def _latest_reflection(attempts: Iterable[AttemptStory]) -> Reflection | None:
    found = [attempt.reflection for attempt in attempts if attempt.reflection is not None]
    return found[-1] if found else None


def _repeated_numbers(story: TaskStory, last: AttemptStory) -> list[int]:
    """The attempts that failed with the last failure's signature, when there are two or more."""
    if not last.error_signature:
        return []
    counts = Counter(a.error_signature for a in story.failures)
    if counts[last.error_signature] < 2:
        return []
    return [a.number for a in story.failures if a.error_signature == last.error_signature]


# -- fitting text ----------------------------------------------------------------------


def _sentence(text: str) -> str:
    """One sentence: trimmed, ending in punctuation, capitalised unless it opens with a
    name from the code (`parse()`, `test_x`), whose case matters."""
    text = joined_lines(text)
    if not text:
        return ""
    if _PLAIN_WORD.match(text):
        text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?…" else text + "."


_PLAIN_WORD = re.compile(r"[a-z]+(?:\s|$)")


def _prose(text: str) -> str:
    return fit_text(text.strip(), TEXT_CHARS)


def _short(text: str) -> str:
    return fit_text(text, ITEM_CHARS)


def _items(items: Iterable[str]) -> list[str]:
    return [_short(item) for item in items if item and item.strip()]
