"""The prompt of one attempt: the task, the subtask and, on a retry, what went wrong.

With reflexion on, a retry carries the last attempt (diff and failure digest) and the
reflections block; with it off, the last attempt only: the baseline that shows what
reflection adds.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.decompose import Subtask, SubtaskPlan
from orchestrator.tasks import Task

DIFF_LIMIT = 12_000  # characters of the last attempt's diff shown in a retry prompt


@dataclass(frozen=True)
class LastAttempt:
    number: int
    diff: str
    failure: str  # the failure digest, or the reason the edits did not apply


def attempt_prompt(
    task: Task,
    plan: SubtaskPlan,
    subtask: Subtask,
    *,
    last: LastAttempt | None = None,
    reflections: str = "",
) -> str:
    parts = [f"# Task {task.id}: {task.title}"]
    if task.description:
        parts.append(task.description)
    criteria = task.acceptance_criteria
    if criteria:
        items = criteria if isinstance(criteria, list) else [criteria]
        parts.append("Acceptance criteria:\n" + "\n".join(f"- {c}" for c in items))
    if len(plan.subtasks) > 1:
        steps = "\n".join(
            f"{i}. {s.title}{'  <- this step' if s.id == subtask.id else ''}"
            for i, s in enumerate(plan.subtasks, start=1)
        )
        parts.append(f"## Plan\n{steps}")
        parts.append(f"## This step: {subtask.title}\n{subtask.description}".rstrip())
    if last is not None:
        parts.append(_last_attempt_block(last))
    if reflections:
        parts.append(reflections)
    return "\n\n".join(parts)


def _last_attempt_block(last: LastAttempt) -> str:
    diff = last.diff or "(the attempt changed no files)"
    if len(diff) > DIFF_LIMIT:
        diff = diff[:DIFF_LIMIT] + f"\n[... {len(diff) - DIFF_LIMIT} characters omitted ...]"
    return (
        f"## Attempt {last.number} failed\n"
        "The working tree still holds that attempt's changes; fix them rather than "
        "starting over unless they are wrong.\n\n"
        f"### Its diff\n```diff\n{diff}\n```\n\n### Why it failed\n```\n{last.failure}\n```"
    )
