"""How a task and a subtask end: the values the loop hands back to its callers."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from orchestrator.checks.convergence import StopReason
from reflection.meter import Meter

# closed: every subtask passed; blocked: escalated to a human; model_unavailable and
# budget: stopped without blame, the task back to open; interrupted: a signal or the
# run's time budget stopped it, the task back to open.
# usage_limit: the agent's or the model's usage window is spent: back to open, `resume_at`
# saying when it resets (when it was said).
TaskStatus = Literal["closed", "blocked", "model_unavailable", "budget", "interrupted", "usage_limit"]
SubtaskEnd = Literal["passed", "escalated", "model_unavailable", "budget", "usage_limit"]


@dataclass
class TaskOutcome:
    task_id: str
    status: TaskStatus
    reason: str
    commits: list[str] = field(default_factory=list)
    attempts: int = 0
    reflections: int = 0
    meter: Meter = field(default_factory=Meter)
    duration_s: float = 0.0
    escalation: Path | None = None
    stop_reason: StopReason | None = None  # why the last subtask's attempts stopped
    only_before: tuple[str, ...] = ()  # blocked only by tests that failed before it started
    verdict: dict[str, Any] | None = None  # the last verdict's parts (judging/verdict.py): what closed it
    others: tuple[str, ...] = ()  # tests failing at its base, not its own, still failing when it closed
    resume_at: float | None = None  # usage_limit: when the limit resets (epoch seconds), if said


@dataclass
class SubtaskResult:
    end: SubtaskEnd
    reason: str
    commit: str | None = None
    escalation: Path | None = None
    stop_reason: StopReason | None = None
    waived: tuple[str, ...] = ()  # known failures the user waived that still failed when it passed
    only_before: tuple[str, ...] = ()  # escalated with only tests failing that failed before the task
    verdict: str | None = None  # the passing verdict's parts, in one line
    parts: dict[str, Any] | None = None  # and as data
    others: tuple[str, ...] = ()  # tests failing at the base, not the task's, still failing then
    resume_at: float | None = None  # usage_limit: when it resets (epoch seconds), if said
