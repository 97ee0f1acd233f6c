"""goldenloop's golden loop: decompose, execute, verify, commit, reflect and retry.

What a library user calls is exported here, each name imported when first used: open a
repository (`ProjectSession`), pick and run a task, or run a night over many (`batch`).
Everything else is reached through its package, whose `__all__` says what is public.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reflection.exports import lazy_exports

if TYPE_CHECKING:
    from orchestrator.batch.engine import OvernightOptions, run_overnight_async
    from orchestrator.config import ProjectConfig, load_config
    from orchestrator.executors.base import ExecutionRequest, ExecutionResult, Executor
    from orchestrator.loop.golden import GoldenLoop
    from orchestrator.loop.outcome import TaskOutcome
    from orchestrator.runlog import RunLog
    from orchestrator.session.errors import UserError
    from orchestrator.session.opening import Overrides
    from orchestrator.session.project import ProjectSession
    from orchestrator.tasks import Task, TaskBoard

_HOMES = {
    "ProjectSession": "orchestrator.session.project",
    "Overrides": "orchestrator.session.opening",
    "UserError": "orchestrator.session.errors",
    "ProjectConfig": "orchestrator.config",
    "load_config": "orchestrator.config",
    "Task": "orchestrator.tasks",
    "TaskBoard": "orchestrator.tasks",
    "TaskOutcome": "orchestrator.loop.outcome",
    "GoldenLoop": "orchestrator.loop.golden",
    "RunLog": "orchestrator.runlog",
    **dict.fromkeys(("ExecutionRequest", "ExecutionResult", "Executor"), "orchestrator.executors.base"),
    **dict.fromkeys(("OvernightOptions", "run_overnight_async"), "orchestrator.batch.engine"),
}

__getattr__ = lazy_exports(__name__, _HOMES)

__all__ = [
    "ExecutionRequest",
    "ExecutionResult",
    "Executor",
    "GoldenLoop",
    "OvernightOptions",
    "Overrides",
    "ProjectConfig",
    "ProjectSession",
    "RunLog",
    "Task",
    "TaskBoard",
    "TaskOutcome",
    "UserError",
    "load_config",
    "run_overnight_async",
]
