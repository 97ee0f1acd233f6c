"""Task reflection in the loop: notes for a task's prompts, and notes from its acceptance.

A learning step, never a gate: the task is closed before it runs, and nothing here can
change how the task ended. A failure is an event in the run log, not an error.
"""

from __future__ import annotations

from orchestrator.loop.parts import LoopParts
from orchestrator.tasks import Task

OUTPUT_BYTES = 16_000  # of the task's commits' diff read for the reflection prompt


def expected_output(task: Task) -> str:
    """The task's acceptance criteria as one text: what its result must satisfy."""
    criteria = task.acceptance_criteria
    if not criteria:
        return ""
    return "\n".join(f"- {c}" for c in criteria) if isinstance(criteria, list) else criteria


def reflects(p: LoopParts, task: Task) -> bool:
    """Whether task reflection is on for this task: its `reflect`, else memory.taskReflection."""
    return p.config.memory.task_reflection if task.reflect is None else task.reflect


def notes_for(p: LoopParts, task: Task) -> str:
    """The Task Improvement Notes of earlier runs of this task, or '' (off, or none yet)."""
    if p.task_reflector is None or not reflects(p, task) or not task.description:
        return ""
    try:
        return p.task_reflector().notes_for(task.description)
    except Exception as exc:  # noqa: BLE001 - missing notes cost a hint, never the run
        p.runlog.event("task_reflection_failed", taskId=task.id, error=str(exc))
        return ""


async def reflect_on_task(p: LoopParts, task: Task, commits: list[str], *, attempts: int) -> None:
    """After the task is accepted: reflect, store the notes, tell the listeners.

    Only a run that made an attempt has something new to reflect on: a reopened task
    whose subtasks were all done closes again without one, and its notes (and their
    `runCount`) stay as they were."""
    if not reflects(p, task) or not task.description:  # no description, no identity
        return
    if p.task_reflector is None:
        p.runlog.event("task_reflection_skipped", taskId=task.id,
                       reason="no model writes reflections (reflexion.enabled and reflexion.useLLM)")
        return
    if attempts == 0:
        p.runlog.event("task_reflection_skipped", taskId=task.id, reason="no attempt ran in this run")
        return
    try:
        output = p.repo.commits_diff(commits, OUTPUT_BYTES)
        made = await p.task_reflector().reflect(task.description, expected_output(task), output)
    except Exception as exc:  # noqa: BLE001 - the store or git failing must not undo the close
        p.runlog.event("task_reflection_failed", taskId=task.id, error=str(exc))
        return
    if made is None:  # the model's trouble, already logged by the strategy
        return
    p.runlog.event(
        "task_reflected",
        taskId=task.id,
        taskDescription=task.description,
        identity=made.identity,
        reflection=made.reflection.to_dict(),
        isFirstReflection=made.is_first,
    )
