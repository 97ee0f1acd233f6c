"""What the loop is made of, built once per run by `orchestrator.session`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.config import ProjectConfig
from orchestrator.executors import Executor
from orchestrator.git.repo import Repo
from orchestrator.layout import Layout
from orchestrator.runlog import RunLog
from orchestrator.tasks import TaskBoard
from reflection.llm import ChatModel
from reflection.meter import Meter
from reflection.service import ReflectionService
from reflection.task_reflector import TaskReflector

if TYPE_CHECKING:
    from orchestrator.checks.review import ReviewGate
    from orchestrator.judging.export import JudgeTrees
    from orchestrator.loop.project_memory import ProjectMemory


@dataclass
class LoopParts:
    project_dir: Path
    config: ProjectConfig
    repo: Repo
    board: TaskBoard
    runlog: RunLog
    executor: Executor
    planner: ChatModel | None  # None: no decomposition call
    reflections: ReflectionService | None  # None: reflexion off
    session_id: str
    meter: Meter  # of the current task, fed by the metered models
    # Asked before every attempt; a reason to stop (e.g. the cost budget) or None.
    budget_check: Callable[[], str | None] | None = None
    # Notes an accepted task leaves for its next run, made on first use by a task that
    # reflects (its `reflect`, else memory.taskReflection); None: no model writes reflections.
    task_reflector: Callable[[], TaskReflector] | None = None
    # Lessons across tasks and the outcome reflections (loop/remember.py); None: reflexion off.
    memory: ProjectMemory | None = None
    # Scores a passing attempt before it is committed (review.enabled); None: off.
    review: ReviewGate | None = None
    # Where verdicts are made: the run's judge's trees, one leased per task (orchestrator/judging/).
    judges: JudgeTrees | None = None

    @property
    def layout(self) -> Layout:
        return Layout(self.project_dir)
