"""The prompt of one attempt: the task, the subtask and, on a retry, what went wrong.

A task that an earlier run accepted may carry notes from that run before its
description (task reflection, reflection/task_reflector.py). With reflexion on, a retry carries the last attempt (diff and failure digest) and the
reflections block; with it off, the last attempt only: the baseline that shows what
reflection adds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.loop.plan import Subtask, SubtaskPlan
from orchestrator.tasks import Task
from reflection.text import cut_block

DIFF_LIMIT = 12_000  # characters of the last attempt's diff shown in a retry prompt


FAILURE_LIMIT = 4_000  # characters of an earlier failure quoted when a retry repeats it


@dataclass(frozen=True)
class LastAttempt:
    number: int
    diff: str
    failure: str  # the failure digest, or the reason the reply could not be applied
    applied: bool = True  # False: the reply could not be applied, so nothing ran
    agent_failed: bool = False  # an external agent's run failed (rather than a reply unapplied)
    repeat_of: int | None = None  # the earlier attempt whose code this one gave back
    reviewed: bool = False  # it passed the checks; `failure` says what its review asks to improve
    # retry.strategy "tree": the files went back to where this attempt started (these
    # words say where); the next attempt is asked for another approach (loop/search.py).
    other_way_from: str | None = None
    # The tree is no longer the one the attempt's reply made (a regression rolled back, a
    # rejected diff undone): the next prompt shows the files as they are, in a new chat.
    tree_moved: bool = False
    # retry.strategy "adaptive" starts afresh (chosen, or after a repeat): a new sample from
    # the base, told only the lessons the model wrote in its reflections: its prompt is the
    # first attempt's, with those lessons (if any) after it (loop/retry_choice.py).
    afresh: bool = False


@dataclass(frozen=True)
class AttemptPrompt:
    """An attempt's words, from the most stable to the least, so that a prompt cache serves
    what a retry repeats. `stable`: the task, the same every attempt; `latest`: what the
    last attempt did and the reflections, new each retry (the builtin executor puts the
    files between the two). `follow_up`: the same news said as the next message of the
    chat that made the last attempt, whose reply already shows its code; None when the
    next attempt starts a new chat (the first, a fresh sample, a start over, a tree that
    moved away from what that chat made)."""

    stable: str
    latest: str = ""
    follow_up: str | None = None

    @property
    def text(self) -> str:
        """The whole prompt in one piece, for an agent that reads one message."""
        return "\n\n".join(part for part in (self.stable, self.latest) if part)


def attempt_parts(
    task: Task,
    plan: SubtaskPlan,
    subtask: Subtask,
    *,
    last: LastAttempt | None = None,
    reflections: str = "",
    notes: str = "",
    lessons: str = "",
    rules: str = "",
    checks: str = "",
) -> AttemptPrompt:
    """`notes`: the Task Improvement Notes of earlier runs (reflection.task_prompts), put
    before the description so that the task as written, and its criteria, come last.
    `rules`: the project's rules (memory/rules.md), first; `lessons`: what other tasks
    taught, after the task and before any earlier attempt of this one."""
    parts = [f"# Task {task.id}: {task.title}"]
    if rules:
        parts.append(rules)
    if notes:
        parts.append(notes)
    if task.description:
        parts.append(task.description)
    criteria = task.acceptance_criteria
    if criteria:
        items = criteria if isinstance(criteria, list) else [criteria]
        parts.append("Acceptance criteria:\n" + "\n".join(f"- {c}" for c in items))
    if checks:
        parts.append(checks)
    if len(plan.subtasks) > 1:
        steps = "\n".join(
            f"{i}. {s.title}{'  <- this step' if s.id == subtask.id else ''}"
            for i, s in enumerate(plan.subtasks, start=1)
        )
        parts.append(f"## Plan\n{steps}")
        parts.append(f"## This step: {subtask.title}\n{subtask.description}".rstrip())
    if lessons:
        parts.append(lessons)
    latest = [_last_attempt_block(last)] if last is not None and not last.afresh else []
    if reflections:
        latest.append(reflections)
    follow = _follow_up_block(last) if last is not None else None
    if follow is not None:  # the task named again: the chat may be long by now
        follow = f"{parts[0]}\n\n{follow}"
    return AttemptPrompt("\n\n".join(parts), "\n\n".join(latest),
                         "\n\n".join([follow, *latest[1:]]) if follow is not None else None)


def focus_text(task: Task, plan: SubtaskPlan, subtask: Subtask) -> str:
    """The task's own words, where the files and code it is about are named: not the
    lessons, reflections or failure output a prompt also carries."""
    criteria = task.acceptance_criteria or []
    parts = [task.title, task.description or "", *(criteria if isinstance(criteria, list) else [criteria])]
    if len(plan.subtasks) > 1:
        parts += [subtask.title, subtask.description]
    return "\n".join(part for part in parts if part)


def checks_block(commands: Sequence[str], *, sandboxed: bool = False) -> str:
    """For an agent that explores the repository itself: how its work will be judged, and
    (in its sandbox) what it cannot do, so that it neither tries nor works around it."""
    lines = ["## How the work is checked"]
    if commands:
        lines += ["These commands must pass when you are done:", *(f"- `{c}`" for c in commands)]
    if sandboxed:
        lines.append("You can change files only in this folder and the temporary folder, and cannot install "
                     "packages. If the change needs a new dependency, add it to the project's dependency file "
                     "(pyproject.toml, requirements.txt, package.json, ...) and name it in your last message.")
    return "\n".join(lines) if len(lines) > 1 else ""


LISTED = 10  # test ids named in one line


def baseline_block(about: Sequence[str], others: Sequence[str], *, proof: bool = False) -> str:
    """What failed before any change: the tests the task must make pass, the ones it must
    leave alone, and (for a bug or a feature) that a test must show the change."""
    lines = []
    if about:
        lines += [f"These tests fail on the repository as it is now, and the task is about them: {_listed(about)}.",
                  "The task is done only when they pass."]
    if others:
        lines.append(f"These fail too and are not this task's (leave them alone): {_listed(others)}.")
    if proof and not about:
        lines.append("The task is done only when a test shows the change: add a test that fails before your "
                     "change and passes after it.")
    if lines:
        lines.append("The tests that existed before the task are run as they were then, whatever you change in them.")
    return "\n".join(["## Tests before any change", *lines]) if lines else ""


def _listed(tests: Sequence[str]) -> str:
    more = f" (and {len(tests) - LISTED} more)" if len(tests) > LISTED else ""
    return ", ".join(tests[:LISTED]) + more


def start_over(number: int, failure: str, *, by: int | None = None) -> str:
    """The block of a prompt that starts over after attempt `number`'s code came back again.

    The tree is back at the subtask's start, and that code is not shown: with its failed
    code in front of it, a small model copies it once more.
    """
    who = f"Attempt {by}" if by is not None else "Your reply"
    return (
        f"## Start over\n"
        f"{who} gave back exactly the code of attempt {number}, which fails like this:\n"
        f"```\n{cut_block(failure, FAILURE_LIMIT)}\n```\n"
        "Sending that code again cannot pass. The files below are back to how they were before "
        "the first attempt: write a new implementation that avoids this failure."
    )


def _follow_up_block(last: LastAttempt) -> str | None:
    """What the last attempt came to, said right after its own reply: the reply shows its
    code, so no diff is repeated. None where the chat no longer matches the files."""
    if (last.repeat_of is not None or last.other_way_from is not None or last.tree_moved or last.agent_failed
            or last.afresh):
        return None
    n = last.number
    if not last.applied:
        return (f"## Attempt {n} could not be applied\n"
                f"Your reply above was not applied to the files, so nothing was tested. Why:\n```\n{last.failure}\n```")
    if last.reviewed:
        return (f"## Attempt {n} passed the checks; its review asks for more\n"
                "Your edit above is in the files and passes. Keep it passing and make the improvements below; "
                f"change nothing else. If this revision is worse, attempt {n} is kept.\n\n"
                f"### The review\n{last.failure}")
    return (f"## Attempt {n} failed\n"
            "Your edit above is in the files, and the checks failed. Fix it rather than starting over unless "
            f"it is wrong; sending the same code again cannot pass.\n\n### Why it failed\n```\n{last.failure}\n```")


def _last_attempt_block(last: LastAttempt) -> str:
    if not last.applied and last.agent_failed:
        return (
            f"## Attempt {last.number} failed to run\n"
            f"The agent's run for attempt {last.number} failed, so nothing was tested. Why:\n"
            f"```\n{last.failure}\n```"
        )
    if not last.applied:
        return (
            f"## Attempt {last.number} could not be applied\n"
            f"Your reply to attempt {last.number} was not applied to the files, so nothing was "
            f"tested. Why:\n```\n{last.failure}\n```"
        )
    if last.repeat_of is not None:
        return start_over(last.repeat_of, last.failure, by=last.number)
    diff = last.diff or "(the attempt changed no files)"
    if len(diff) > DIFF_LIMIT:
        diff = diff[:DIFF_LIMIT] + f"\n[... {len(diff) - DIFF_LIMIT} characters omitted ...]"
    if last.other_way_from is not None:
        return (
            f"## Attempt {last.number} failed: try another way\n"
            f"The files are back to where attempt {last.number} started: {last.other_way_from}\n\n"
            f"Attempt {last.number}'s approach is shown below so that you can avoid it: take a "
            "different approach rather than repairing or repeating it.\n\n"
            f"### Its diff\n```diff\n{diff}\n```\n\n### Why it failed\n```\n{last.failure}\n```"
        )
    if last.reviewed:
        return (
            f"## Attempt {last.number} passed the checks; its review asks for more\n"
            "The working tree holds that attempt's changes and they pass. Keep them passing and "
            "make the improvements below; change nothing else. If this revision is worse, "
            f"attempt {last.number} is kept.\n\n"
            f"### Its diff\n```diff\n{diff}\n```\n\n### The review\n{last.failure}"
        )
    return (
        f"## Attempt {last.number} failed\n"
        "The working tree still holds that attempt's changes; fix them rather than "
        "starting over unless they are wrong. Sending the same code again cannot pass.\n\n"
        f"### Its diff\n```diff\n{diff}\n```\n\n### Why it failed\n```\n{last.failure}\n```"
    )


