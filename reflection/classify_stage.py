"""Heuristic reflection on an attempt that failed where no check could say why.

The agent's run failed or ran out of time, nothing here can run it, the attempt
changed the tests or the files that judge it, it changed no file, or it gave back an
earlier failed attempt's code. The reason is already one plain sentence (the context's
digest), so each stage turns it into what went wrong and what to do instead. A reply
that could not be applied is `classify_edit`'s; a failure the checks explain,
`classify`'s.
"""

from __future__ import annotations

from collections.abc import Callable

from reflection.schema import FailureCategory, FailureContext, FailureType, ReflectionDraft
from reflection.redact import redact
from reflection.text import error_gist

REASON_CHARS = 300  # of the reason quoted in the analysis; the draft is clamped again
# What went wrong is at the reason's end as often as at its start (an agent's traceback
# ends with its exception), so the quote keeps both, redacted before it is cut.


def classify_stage(ctx: FailureContext) -> ReflectionDraft:
    """The heuristic reflection for a failure outside the checks (`ctx.stage` not verify or edit)."""
    reason = error_gist(redact(ctx.digest), REASON_CHARS).rstrip(" .")
    return _STAGES.get(ctx.stage, _agent)(ctx, reason)


def _agent(ctx: FailureContext, reason: str) -> ReflectionDraft:
    if ctx.failure_type == FailureType.TIMEOUT:
        return ReflectionDraft.clamped(
            FailureCategory.APPROACH_ERROR,
            f"The agent's run was stopped at its time limit before it finished ({reason}), so none of "
            "its changes were checked.",
            "Take a smaller step: make the one change this subtask asks for, run only the failing "
            "test, and finish well within the time limit.",
            ["Do not explore the whole repository first", "Avoid long-running or interactive commands"],
            0.5,
        )
    return ReflectionDraft.clamped(
        FailureCategory.ENVIRONMENT,
        f"The agent's run failed before its work could be checked: {reason}.",
        "Read the agent's last output for the error that stopped it, then make the change with "
        "fewer, simpler steps and end the run normally.",
        ["Find the first error in the agent's last output", "End the run with the change made"],
        0.4,
    )


def _environment(ctx: FailureContext, reason: str) -> ReflectionDraft:
    return ReflectionDraft.clamped(
        FailureCategory.ENVIRONMENT,
        f"The attempt could not run here: {reason}. No change to the code can fix that.",
        "A person must fix the environment (install the program, set the key, shorten the "
        "task) before this subtask runs again.",
        ["Fix the environment named above", "Run the task again once it is fixed"],
        0.6,
    )


def _integrity(ctx: FailureContext, reason: str) -> ReflectionDraft:
    return ReflectionDraft.clamped(
        FailureCategory.APPROACH_ERROR,
        f"The attempt changed what judges it, or what it must not touch, instead of the code: {reason}. "
        "That change was undone.",
        "Leave the tests, the project's config and the user's files as they are; make the checks "
        "pass by changing the code under test.",
        ["Change only the code the subtask is about", "Never weaken or skip a test to make it pass"],
        0.6,
    )


def _no_change(ctx: FailureContext, reason: str) -> ReflectionDraft:
    return ReflectionDraft.clamped(
        FailureCategory.APPROACH_ERROR,
        "The attempt changed no file, so nothing it did could make the task done.",
        "Make the change the subtask asks for in the repository's files; describing it is not enough.",
        ["Edit the file the subtask names", "Check that the edit was written before ending"],
        0.6,
    )


def _repeat(ctx: FailureContext, reason: str) -> ReflectionDraft:
    return ReflectionDraft.clamped(
        FailureCategory.APPROACH_ERROR,
        f"The attempt gave back code that had already failed: {reason}.",
        "Take a different approach from every earlier attempt; the same code fails the same way.",
        ["Read why the earlier attempt failed", "Change the approach, not only the wording"],
        0.6,
    )


_STAGES: dict[str, Callable[[FailureContext, str], ReflectionDraft]] = {
    "agent": _agent,
    "environment": _environment,
    "integrity": _integrity,
    "no_change": _no_change,
    "repeat": _repeat,
}
