"""Task -> subtasks: one model call, or none for a small task.

The model proposes at most 5 subtasks as JSON; any error or bad reply falls back to one
subtask equal to the task, so decomposition can slow a run down but never stop it.
"""

from __future__ import annotations

import logging

from orchestrator.loop.plan import Subtask, SubtaskPlan, single_subtask_plan
from orchestrator.tasks import Task
from reflection.llm import ChatModel
from reflection.redact import redact

log = logging.getLogger("goldenloop.decompose")

MAX_SUBTASKS = 5


def is_small(task: Task, min_chars: int) -> bool:
    """A task whose whole text is short is done in one subtask, without a model call."""
    return len(task.title) + len(task.description) < min_chars


PROMPT = """Split this coding task into at most {limit} ordered subtasks. Each subtask must
leave the repository passing its tests, so prefer few, self-contained steps; a small task
is one subtask. Mark a subtask "aboutTests": true only when its job is to write or change
tests.

Task {id}: {title}
{description}
{criteria}
Reply with JSON only:
{{"subtasks": [{{"title": "...", "description": "...", "aboutTests": false}}]}}"""


async def decompose(task: Task, model: ChatModel | None, *, timeout_s: float) -> SubtaskPlan:
    """Ask the model for subtasks; fall back to the task itself on any trouble."""
    if model is None:
        return single_subtask_plan(task)
    criteria = task.acceptance_criteria or ""
    if isinstance(criteria, list):
        criteria = "\n".join(f"- {c}" for c in criteria)
    prompt = PROMPT.format(
        limit=MAX_SUBTASKS,
        id=task.id,
        title=task.title,
        description=task.description,
        criteria=f"Acceptance criteria:\n{criteria}\n" if criteria else "",
    )
    try:
        reply = await model.complete([{"role": "user", "content": redact(prompt)}], timeout=timeout_s)
        return _plan_from_reply(task, reply.text)
    except Exception as exc:  # noqa: BLE001 - a plan is optional; the task itself is a plan
        log.warning("decomposition of %s failed (%s); using one subtask", task.id, exc)
        return single_subtask_plan(task)


def _plan_from_reply(task: Task, text: str) -> SubtaskPlan:
    # Only a planning call has a reply to read: a small task never pays for this import.
    from reflection.generate import extract_json

    obj = extract_json(text)
    items = obj.get("subtasks") if obj else None
    if not isinstance(items, list) or not items:
        raise ValueError("the reply has no list of subtasks")
    subtasks = []
    for i, item in enumerate(items[:MAX_SUBTASKS], start=1):
        title = item.get("title") if isinstance(item, dict) else None
        if not isinstance(title, str) or not title.strip():
            raise ValueError(f"subtask {i} has no title")
        description = item.get("description")
        subtasks.append(
            Subtask(
                id=f"{task.id}.{i}",
                title=" ".join(title.split())[:200],
                description=description if isinstance(description, str) else "",
                about_tests=item.get("aboutTests") is True,
            )
        )
    return SubtaskPlan(task_id=task.id, source="llm", subtasks=subtasks)
