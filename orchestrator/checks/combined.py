"""The checks of a task's commits on top of what landed while it ran.

A task's checks passed on the tree it started from. When other tasks landed on the base
branch meanwhile, each change may pass alone and the two fail together (one removes what
the other starts to use), so before it lands its commits are checked again on top of
theirs. Used by parallel runs (`orchestrator.batch.engine`) and the fleet
(`orchestrator.fleet.integrate`).
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.checks.preflight import waived_failures
from orchestrator.checks.verify import Verdict, verify
from orchestrator.checks.waivers import Waivers
from orchestrator.config import ProjectConfig
from orchestrator.loop.state import task_text
from orchestrator.processes import session_started
from orchestrator.recovery.journal import EarlySessions
from orchestrator.tasks import Task


async def combined_failure(tree: Path, project_dir: Path, task: Task, config: ProjectConfig) -> Verdict | None:
    """The failing verdict of the checks on `tree` (the task's commits on the new tip); None
    when they pass, or fail only on tests the user waived."""
    early = EarlySessions(project_dir, task.id)  # a kill must not leave them running
    recording = session_started.set(early.add)
    try:
        verdict = await verify(tree, config.checks)
    finally:
        session_started.reset(recording)
        early.end()
    waivers = Waivers.of(config.checks_config.known_failures)
    if verdict.passed or waived_failures(verdict, None, waivers, config.checks, task_text(task)):
        return None
    return verdict


def combined_reason(verdict: Verdict, branch: str, kept_on: str) -> str:
    """Why the task is blocked, in one sentence."""
    return (f"its checks passed on the tree it started from, but fail with the tasks that landed on {branch} "
            f"since ({verdict.summary()}); its commits are kept on branch {kept_on}")
