"""Outcome reflections written by a model, the heuristic's as the fallback (seed 001).

`outcome_reflections` (reflection/outcome.py) decides which records a task's end calls
for and writes them from what the loop knows. With a model, each failed, partial or
success record is then asked of the model: the task's story (redacted before it is
sent) and the seed's fields for that outcome, as one JSON object. A reply that holds
every field of its outcome replaces the heuristic's words (`source: "llm"`, `model`);
a timeout, an error, or a reply without them keeps the heuristic record as it was.

MARS (principle and procedure) is the model's to judge, as the seed reserves it: for a
failure only when it says the cause is systemic (`"systemic": true`), for a success only
when it says the strategy is replicable (`"replicable": true`); otherwise the record
carries neither. The principle always reads "I should follow this rule: ...".
"""

from __future__ import annotations

import logging
from typing import Any

import anyio

from reflection.generate import extract_json
from reflection.llm import ChatModel, model_ready
from reflection.outcome import (
    PRINCIPLE_PREFIX,
    AttemptStory,
    OutcomeReflection,
    SuccessProcedures,
    TaskStory,
    outcome_reflections,
)
from reflection.redact import redact
from reflection.schema import ITEM_CHARS, TEXT_CHARS, fit_text
from reflection.text import reason_of, reply_items, reply_text, shorten

__all__ = ["MARKER", "fields_from_reply", "outcome_messages", "written_outcome_reflections"]

log = logging.getLogger("goldenloop.outcome")

MARKER = "## How the task ended"  # what a script (or a log reader) tells this prompt by
DESCRIPTION_CHARS = 1500
SUMMARY_CHARS = 400
MAX_ATTEMPTS_SHOWN = 12
MAX_STEPS = 10

# The seed's fields per outcome, all required: (JSON key, field, what it asks).
FIELDS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "failed": (
        ("whatHappened", "what_happened", "factual description of the task and how it ended"),
        ("whatWentWrong", "what_went_wrong", "the specific failure point: which step, tool or input"),
        ("whyItWentWrong", "why_it_went_wrong",
         "the root cause: wrong strategy, bad input, missing knowledge or an external failure"),
        ("whatToDoDifferently", "what_to_do_differently", "an actionable correction, specific enough to follow"),
        ("tacticalRule", "tactical_rule", "one preventive rule in one sentence"),
    ),
    "partial": (
        ("whatHappened", "what_happened", "factual description of the task and how it ended"),
        ("whatWentWrong", "what_went_wrong", "the specific failure point: which step, tool or input"),
        ("whatToDoDifferently", "what_to_do_differently", "an actionable correction, specific enough to follow"),
    ),
    "success": (
        ("strategy", "strategy", "the strategy that worked, concrete enough to use again"),
        ("whyItWorked", "why_it_worked", "why it worked where the earlier attempts did not"),
    ),
}
# The flag that earns a record its MARS pair.
MARS_FLAG = {"failed": "systemic", "partial": "systemic", "success": "replicable"}
_MARS_WHEN = {
    "systemic": "true only when the cause is systemic: it would strike other tasks too (the environment, a tool, "
                "a wrong approach that was repeated), not a one-off slip",
    "replicable": "true only when the strategy is replicable: its steps would solve similar tasks, not only this one",
}

SYSTEM = ("You write the reflection a coding task leaves when it ends, so that later tasks learn from it. "
          "Answer with one JSON object and nothing else. Be factual and specific: name the files, commands, "
          "tests and errors the story names; never invent any. Never write secrets, personal data, hostnames "
          "or internal addresses; describe them generically.")


async def written_outcome_reflections(
    story: TaskStory, model: ChatModel | None, *, timeout_s: float = 30.0,
    success_procedures: SuccessProcedures = "after_failure",
) -> list[OutcomeReflection]:
    """The outcome records a task's end calls for, written by `model` where it answers
    well, else by the heuristic; never raises for model trouble."""
    records = outcome_reflections(story, success_procedures=success_procedures)
    if model is None:
        return records
    return [await _rewritten(record, story, model, timeout_s) for record in records]


async def _rewritten(record: OutcomeReflection, story: TaskStory, model: ChatModel,
                     timeout_s: float) -> OutcomeReflection:
    if record.outcome not in FIELDS:
        return record
    try:
        # litellm's first import is not the model's slowness: the timeout starts once it is ready
        await model_ready(model)
        with anyio.fail_after(timeout_s):
            reply = await model.complete(outcome_messages(story, record.outcome), timeout=timeout_s)
        obj = extract_json(reply.text)
        if obj is None:
            raise ValueError("the reply holds no JSON object")
        fields = fields_from_reply(obj, record.outcome)
    except Exception as exc:  # noqa: BLE001 - any model trouble means: keep the heuristic's record
        log.warning("outcome reflection by %s failed (%s); keeping the heuristic one", model.name, reason_of(exc))
        return record
    return record.model_copy(update={**fields, "source": "llm", "model": model.name})


def fields_from_reply(obj: dict[str, Any], outcome: str) -> dict[str, Any]:
    """The record's fields from a model's JSON (camelCase or snake_case keys), redacted and
    clamped; ValueError when one the outcome requires is missing or empty."""
    fields: dict[str, Any] = {}
    for key, name, _ in FIELDS[outcome]:
        text = reply_text(obj.get(key, obj.get(name)))
        if not text:
            raise ValueError(f"the reply has no {key}")
        fields[name] = fit_text(text, TEXT_CHARS)
    principle = reply_text(obj.get("principle"))
    steps = [fit_text(step, ITEM_CHARS) for step in reply_items(obj.get("procedure"))[:MAX_STEPS]]
    if _true(obj.get(MARS_FLAG[outcome])) and principle and steps:
        rule = principle.removeprefix(PRINCIPLE_PREFIX.strip()).strip()
        fields["principle"] = fit_text(PRINCIPLE_PREFIX + rule, TEXT_CHARS)
        fields["procedure"] = steps
    else:  # not systemic, not replicable, or half a pair: no MARS output
        fields["principle"] = fields["procedure"] = None
    return fields


def _true(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "yes"))


def outcome_messages(story: TaskStory, outcome: str) -> list[dict[str, str]]:
    """The question for one outcome record; every word of the story redacted before it is sent."""
    flag = MARS_FLAG[outcome]
    keys = [f'  "{key}": {what}' for key, _, what in FIELDS[outcome]]
    keys += [f'  "{flag}": {_MARS_WHEN[flag]}',
             f'  "principle": only when {flag} is true: "{PRINCIPLE_PREFIX}<one sentence>"',
             f'  "procedure": only when {flag} is true: the steps that work, a list of short strings']
    user = "\n".join([MARKER, *_story_lines(story), "", "## The attempts", *_attempt_lines(story.attempts), "",
                      f"## What to write\nA {outcome} reflection, as one JSON object with these keys:",
                      *keys])
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": redact(user)}]


def _story_lines(story: TaskStory) -> list[str]:
    ending = "was blocked" if story.ended == "blocked" else "was closed"
    done = f"{story.subtasks_done} of {story.subtasks_total} subtasks were committed"
    lines = [f"Task {story.task_id} ({story.title}) {ending}; {done}."]
    if story.task_type:
        lines.append(f"Type: {story.task_type}." + (f" Labels: {', '.join(story.labels)}." if story.labels else ""))
    if story.description:
        lines.append(f"Description: {shorten(story.description, DESCRIPTION_CHARS)}")
    if story.reason:
        lines.append(f"Reason: {shorten(story.reason, SUMMARY_CHARS)}")
    if story.stop_reason:
        lines.append(f"Retrying stopped: {story.stop_reason}.")
    if story.waived:
        lines.append(f"Waived tests: {', '.join(story.waived)}.")
    return lines


def _attempt_lines(attempts: tuple[AttemptStory, ...]) -> list[str]:
    lines = []
    for attempt in attempts[-MAX_ATTEMPTS_SHOWN:]:
        how = "passed" if attempt.passed else f"failed ({attempt.failure_kind or 'unknown'})"
        line = f"{attempt.number}. {how}: {shorten(attempt.summary, SUMMARY_CHARS)}"
        if attempt.error_signature:
            line += f" Error: {attempt.error_signature}."
        if attempt.files:
            line += f" Files: {', '.join(attempt.files[:8])}."
        if attempt.reflection is not None:
            line += (f" Its reflection: {shorten(attempt.reflection.analysis, SUMMARY_CHARS)} -> "
                     f"{shorten(attempt.reflection.suggestion, SUMMARY_CHARS)}")
        lines.append(line)
    return lines or ["(none ran)"]
