"""The words we send: the reflection prompt, and the reflections block of a retry prompt."""

from __future__ import annotations

from collections.abc import Sequence

from reflection.schema import FailureCategory, FailureContext, Reflection
from reflection.text import cut_block
from reflection.text import template_problem as placeholder_problem

DIFF_CHARS = 6_000  # enough of the attempt's diff to see what it did, not the whole tree

SYSTEM = (
    "You review one failed attempt of a coding agent and write a short self-reflection "
    "that will be shown to the agent before it tries again. Be specific: name the failing "
    "test, the assertion or exception, the file and line, and the wrong assumption behind "
    "them. Do not write code. Reply with one JSON object and nothing else."
)

_CATEGORIES = " | ".join(c.value for c in FailureCategory)

_REPLY_SHAPE = f"""Reply with exactly this JSON object:
{{
  "category": "{_CATEGORIES}",
  "analysis": "what went wrong and why, 1-2 sentences",
  "suggestion": "what to do differently on the next attempt, 1-2 sentences",
  "actionItems": ["concrete step", "..."],
  "confidence": 0.0
}}
analysis and suggestion at most 500 characters each; at most 5 actionItems of at most 200
characters; confidence between 0 and 1."""


# What the model is told when the checks did not run or did not explain the failure.
STAGE_WORDS = {
    "edit": "the reply could not be applied as an edit, so nothing ran",
    "agent": "the coding agent's run failed or ran out of time, so its work was not checked",
    "environment": "the attempt could not run here at all; no change to the code can fix that",
    "integrity": "the attempt changed the tests, the checks' config or the user's files; that was undone",
    "no_change": "the attempt changed no file",
    "repeat": "the attempt gave back the code of an earlier failed attempt",
}


# A project's own reflection question (reflexion.promptFile) may use these; the JSON
# shape of the reply is always appended, because the answer is read as that JSON.
PLACEHOLDERS = ("subtask", "details", "attempt", "failure_type", "files", "failure", "diff", "earlier")


def template_problem(template: str) -> str | None:
    """What makes a reflection prompt template unusable, as a phrase; None if nothing."""
    return placeholder_problem(template, PLACEHOLDERS, required="failure",
                               required_is="the failure digest to reflect on")


def _from_template(template: str, ctx: FailureContext, previous: Sequence[Reflection]) -> str:
    earlier = "\n".join(f"- {r.analysis} Tried: {r.suggestion}" for r in previous) or "(none)"
    question = template.format(
        subtask=ctx.subtask_title, details=ctx.subtask_description or "(none)", attempt=ctx.attempt_number,
        failure_type=ctx.failure_type.value if ctx.failure_type else "(unknown)",
        files=", ".join(ctx.files_modified) or "(none)", failure=ctx.digest,
        diff=cut_block(ctx.diff, DIFF_CHARS) or "(no diff)", earlier=earlier,
    )
    return f"{question}\n\n{_REPLY_SHAPE}"


def reflection_messages(
    ctx: FailureContext, previous: Sequence[Reflection] = (), template: str | None = None
) -> list[dict[str, str]]:
    """Chat messages asking a model to reflect on the failure in `ctx`; `template`: the
    project's own question (see PLACEHOLDERS)."""
    if template is not None:
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": _from_template(template, ctx, previous)}]
    parts = [
        f"Subtask: {ctx.subtask_title}",
        ctx.subtask_description and f"Details: {ctx.subtask_description}",
        f"Attempt: {ctx.attempt_number}",
        ctx.stage in STAGE_WORDS and f"Where it failed: {STAGE_WORDS[ctx.stage]}",
        ctx.failure_type and f"Failure type: {ctx.failure_type.value}",
        ctx.files_modified and "Files modified: " + ", ".join(ctx.files_modified),
        ctx.preexisting_tests and "Known failures (failing the same way before the task, and accepted by "
        "the user; not caused by this attempt, so do not blame it for them): " + ", ".join(ctx.preexisting_tests[:10]),
        f"Failure digest:\n{ctx.digest}",
        ctx.diff and f"The attempt's diff:\n{cut_block(ctx.diff, DIFF_CHARS)}",
    ]
    if ctx.repeats_previous:
        parts.append(
            "This attempt failed exactly like the one before it: the last reflection did "
            "not work. Find a different explanation and a different approach."
        )
    if previous:
        earlier = "\n".join(f"- {r.analysis} Tried: {r.suggestion}" for r in previous)
        parts.append(f"Earlier reflections on this subtask (do not repeat them):\n{earlier}")
    parts.append(_REPLY_SHAPE)
    user = "\n\n".join(p for p in parts if p)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


# The block's words are the Reflexion design's own (docs/REFLEXION.md, "The injected block"):
# its heading, the line that asks to learn first, a section per attempt, the closing order.
HEADING = "## Reflections from Previous Attempts"
LEAD = "Learn from these insights before proceeding:"
CLOSING = "You MUST address these issues. Do NOT repeat the same mistakes."


def format_for_prompt(reflections: Sequence[Reflection]) -> str:
    """The retry prompt's block of reflections, newest attempt first; empty when none."""
    if not reflections:
        return ""
    ordered = sorted(reflections, key=lambda r: (r.attempt_number, r.created_at), reverse=True)
    lines = [HEADING, "", LEAD]
    for r in ordered:
        lines += ["", f"### Attempt {r.attempt_number}",
                  f"- **What went wrong**: {r.analysis}",
                  f"- **What to do differently**: {r.suggestion}"]
        if r.action_items:
            lines.append("- **Action items**:")
            lines.extend(f"  - {item}" for item in r.action_items)
    lines += ["", CLOSING]
    return "\n".join(lines)
