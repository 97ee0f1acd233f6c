"""A task's subtasks and their state, saved in `.openagents/subtasks/<taskId>.json`.

The plan is saved after every change, so a rerun resumes after the last finished
subtask, and a crashed run's subtask knows where it started.
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import Field, ValidationError

from orchestrator.judging.judgement import JudgedOutcome
from orchestrator.layout import Layout
from orchestrator.tasks import Task
from reflection.fileio import atomic_write
from reflection.schema import CamelModel, utc_now

log = logging.getLogger("goldenloop.plan")

SubtaskStatus = Literal["pending", "in_progress", "done", "failed"]


# How an attempt ended: as the judge saw its verdict, or before any verdict (its reply
# could not be applied, it repeated a failed attempt's code, the model refused the
# prompt, it changed the user's uncommitted files).
# "reviewed": it passed the checks, but the review asked for a revision or preferred
# another passing attempt; it is no failure.
# "preexisting": older versions passed an attempt over failures they guessed were not the
# task's; kept so that their plans still load.
AttemptOutcome = Literal[JudgedOutcome, Literal["edit_failed", "repeat", "model_refused", "user_files", "reviewed",
                                                "preexisting"]]


class AttemptRecord(CamelModel):
    """What one attempt did and how verification judged it."""

    number: int  # the subtask's attempts across runs
    started_at: datetime = Field(default_factory=utc_now)
    outcome: AttemptOutcome
    failure_type: str | None = None
    summary: str = ""
    error_signature: str | None = None
    tests_passed: int | None = None
    tests_failed: int | None = None
    files_changed: list[str] = Field(default_factory=list)
    reflection_id: str | None = None
    duration_s: float | None = None
    format_asked: str | None = None  # the edit format the model was asked for
    format_received: str | None = None  # the shape of its reply (whole, search-replace, ...)
    verdict: dict[str, Any] | None = None  # its verdict's parts: pass-to-pass, fail-to-pass, the tests named


class Subtask(CamelModel):
    id: str
    title: str
    description: str = ""
    about_tests: bool = False  # the subtask's job is to write or change tests
    status: SubtaskStatus = "pending"
    failure_count: int = 0
    last_failure_reason: str | None = None
    attempts: list[AttemptRecord] = Field(default_factory=list)
    commit: str | None = None
    # Why its attempts stopped (a StopReason value); the key keeps its first name.
    convergence: str | None = None
    # Where the subtask started, so a crashed run can put the tree back.
    base_commit: str | None = None
    dirty_before: list[str] = Field(default_factory=list)
    # The failure (a redacted FailureContext) whose reflection the next attempt's reply is to
    # write (reflexion.oneCall): a run killed before that reply leaves it for the next run.
    pending_reflection: dict[str, Any] | None = None

    @property
    def next_number(self) -> int:
        """The number the subtask's next attempt is recorded under, counting earlier runs."""
        return len(self.attempts) + 1


class SubtaskPlan(CamelModel):
    task_id: str
    source: Literal["llm", "task"] = "task"
    created_at: datetime = Field(default_factory=utc_now)
    subtasks: list[Subtask]

    @staticmethod
    def path_for(project_dir: Path, task_id: str) -> Path:
        return Layout(project_dir).plan(task_id)

    @classmethod
    def load(cls, path: Path) -> SubtaskPlan | None:
        """The saved plan, or None when there is none or it is unreadable."""
        try:
            return cls.model_validate(orjson.loads(path.read_bytes()))
        except FileNotFoundError:
            return None
        except (orjson.JSONDecodeError, ValidationError) as exc:
            log.warning("ignoring unreadable subtask plan %s: %s", path, exc)
            return None

    def save(self, path: Path) -> None:
        atomic_write(path, orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2) + b"\n")

    def next_subtask(self) -> Subtask | None:
        return next((s for s in self.subtasks if s.status != "done"), None)


def single_subtask_plan(task: Task) -> SubtaskPlan:
    subtask = Subtask(id=f"{task.id}.1", title=task.title, description=task.description)
    return SubtaskPlan(task_id=task.id, source="task", subtasks=[subtask])
