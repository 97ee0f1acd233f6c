"""The checks of a task's commits on top of what landed while it ran.

A task's verdict was made against the tree it started from. When other tasks landed on
the base branch meanwhile, each change may pass alone and the two fail together (one
removes what the other starts to use), so before it lands its commits are checked again
on top of theirs, in a judge's tree like every verdict. What may still fail there is what
failed at the task's base and was not its own (the other tasks' old failures its close
note lists); anything else blocks it. Used by parallel runs (`orchestrator.batch.engine`)
and the fleet (`orchestrator.fleet.integrate`).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import anyio

from orchestrator.config import ProjectConfig
from orchestrator.git.repo import Repo
from orchestrator.judging.export import JudgeTrees
from orchestrator.judging.judge import Ground
from orchestrator.judging.recorded import BaselineRecords
from orchestrator.judging.selection import Selection
from orchestrator.judging.sessions import Run
from orchestrator.processes import session_started
from orchestrator.recovery.journal import EarlySessions


async def combined_failure(repo: Repo, judges: JudgeTrees, config: ProjectConfig, commit: str, *,
                           project_dir: Path, task_id: str, allowed: Collection[str] = (),
                           first: Collection[str] = ()) -> Run | None:
    """The run of the checks on `commit` (the task's commits on the new tip) when it fails
    on more than `allowed` (the task's base's failures that were not its own); else None.
    `first`: the test files the task and the tasks that landed changed; when pytest runs
    them they run first, in a session of their own, and one of their tests failing that is
    not allowed to is the answer. Else the whole suite runs in its own order, in the
    judge's tree written again (judging/selection.py)."""
    tree = await anyio.to_thread.run_sync(repo.tree_of, commit)
    early = EarlySessions(project_dir, task_id)  # a kill must not leave them running
    recording = session_started.set(early.add)
    try:
        with judges.lease() as judge_tree:
            # A whole run is recorded: the next task starts from this very tree once it lands.
            ground = Ground.of(repo, judge_tree, config, records=BaselineRecords.of(project_dir, config))
            if first and config.retry.failing_first and len(config.checks.tests) == 1:
                quick = await ground.run(tree, tests_only=True, select=Selection("only", frozenset(first)))
                if _blocks(quick, allowed, whole=False):
                    return quick
            run = await ground.run(tree)
    finally:
        session_started.reset(recording)
        early.end()
    return run if _blocks(run, allowed, whole=True) else None


def _blocks(run: Run, allowed: Collection[str], *, whole: bool) -> bool:
    """Whether `run` fails on more than `allowed`; `whole`: it ran every check, so a failure
    it cannot name by test (a typecheck, a crash) blocks too."""
    if run.verdict.passed:
        return False
    failing, complete = run.failing()
    if not whole:
        return run.reported and bool(failing - set(allowed))
    typecheck = any(not s.passed and s.steps and s.steps[-1].kind == "typecheck" for s in run.singles)
    return not (run.setup_failed is None and complete and not typecheck and failing <= set(allowed))


def combined_reason(run: Run, branch: str, kept_on: str, allowed: Collection[str] = ()) -> str:
    """Why the task is blocked, in one sentence."""
    failing, _ = run.failing()
    new = sorted(failing - set(allowed))
    said = f"{', '.join(new[:3])}{' and more' if len(new) > 3 else ''} fail" if new else run.verdict.summary()
    return (f"its checks passed on the tree it started from, but fail with the tasks that landed on {branch} "
            f"since ({said}); its commits are kept on branch {kept_on}")
