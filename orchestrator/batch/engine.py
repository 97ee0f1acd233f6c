"""overnight: the golden loop over one or more backlogs until a budget or the backlogs end.

Each repository is opened like `do-one-task` opens it (its own project.json, lock,
recovery) and its ready tasks are run one after another, or K at a time, each worker in
a worktree of its own that it reuses task after task (`orchestrator.batch.worktree`).
Before each task the run checks its budgets (task count, time, cost) and three
consecutive infrastructure failures; a task counts against the task count when a worker
claims it, so no more tasks start than the count allows. During a task the time budget
is enforced by cancellation, and the cost budget is one ledger shared by the workers:
every model call reserves its worst case before it is made (`orchestrator.budget`). A
stopped or interrupted task is put back to open with its tree restored, so the run can
be killed at any moment.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio
import orjson

from orchestrator.batch.morning_report import write_morning_report
from orchestrator.batch.progress import write_progress
from orchestrator.batch.report_parts import RunHeader
from orchestrator.batch.summary import RepoReport
from orchestrator.batch.worktree import Landing, MergeConflict, NotLanded, Worktree, Worktrees
from orchestrator.budget import SpendLimit
from orchestrator.checks.convergence import StopReason
from orchestrator.git.repo import Repo
from orchestrator.judging.combined import combined_failure, combined_reason
from orchestrator.judging.test_paths import DEFAULT_TEST_GLOBS, is_test_path
from orchestrator.layout import Layout
from orchestrator.loop.outcome import TaskOutcome
from orchestrator.recovery import landing
from orchestrator.runlog import Listener, RunLog, new_run_id
from orchestrator.session import (
    EXIT_BLOCKED,
    EXIT_DONE,
    Overrides,
    ProjectSession,
    UserError,
)
from orchestrator.tasks import Task
from reflection.fileio import atomic_write
from reflection.litellm_setup import litellm_home
from reflection.llm import price_known
from reflection.meter import Meter
from reflection.redact import redact

T = TypeVar("T")
INFRA_FAILURES_TO_STOP = 3
LIMIT_UNSAID_WAIT_S = 15 * 60  # a usage limit that did not say when it resets: tried again after this


def _clock(epoch: float) -> str:
    return datetime.fromtimestamp(epoch).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


@dataclass
class Budget:
    """Run-wide limits from the command line; None means no limit."""

    max_tasks: int | None = None
    max_seconds: float | None = None
    max_cost: float | None = None
    started: float = field(default_factory=time.monotonic)
    started_tasks: int = 0  # claimed by a worker, whatever their end: --max-tasks counts these
    meter: Meter = field(default_factory=Meter)

    def seconds_left(self, own_limit: float | None = None) -> float | None:
        limits = [x for x in (self.max_seconds, own_limit) if x is not None]
        return None if not limits else min(limits) - (time.monotonic() - self.started)


class RepoRun:
    """One repository's share of an overnight run."""

    def __init__(self, session: ProjectSession, budget: Budget, parallel: int,
                 slots: anyio.CapacityLimiter | None = None) -> None:
        self.session = session
        self.budget = budget
        self.parallel = parallel
        self.slots = slots  # tasks in flight across every repository of the run; None: this one's workers
        c = session.config
        self.own_max_tasks = c.max_tasks_per_run
        self.own_seconds = c.max_runtime_minutes * 60 if c.max_runtime_minutes else None
        self.own_cost = c.max_cost_usd
        # The run's money: one ledger for every worker, checked before each task and each
        # attempt, and reserved from before each model call (its own, task-wide limits are
        # the session's).
        self.spend = SpendLimit(budget.meter, max_cost=self.max_cost(), scope="run")
        self.report = RepoReport(session.project_dir, session.runlog.run_id)  # type: ignore[union-attr]
        self.running: set[str] = set()
        self.started = 0  # tasks claimed in this repository (maxTasksPerRun)
        self.claims = threading.Lock()  # checking the task count and claiming are one step
        self.infra_failures = 0
        self.environment_failures: list[str] = []  # the same environment failure, task after task
        w = c.worktree
        self.worktrees = Worktrees(session.project_dir, link=w.link, copy=w.copy_)
        self.trees: list[Worktree] = []  # every worker's, removed when the run ends
        self.main_lock = threading.Lock()  # the workers may run on event loops of their own

    # -- budgets --------------------------------------------------------------------

    def max_cost(self) -> float | None:
        limits = [x for x in (self.budget.max_cost, self.own_cost) if x is not None]
        return min(limits) if limits else None

    def task_count_reason(self) -> str | None:
        b = self.budget
        if b.max_tasks is not None and b.started_tasks >= b.max_tasks:
            return f"task count reached ({b.max_tasks})"
        if self.own_max_tasks is not None and self.started >= self.own_max_tasks:
            return f"task count reached (maxTasksPerRun {self.own_max_tasks})"
        return None

    def stop_reason(self) -> str | None:
        """Checked before each task."""
        b = self.budget
        reason = self.task_count_reason()
        if reason:
            return reason
        left = b.seconds_left(self.own_seconds)
        if left is not None and left <= 0:
            return "time budget used up"
        if self.infra_failures >= INFRA_FAILURES_TO_STOP:
            return f"{INFRA_FAILURES_TO_STOP} infrastructure failures in a row (model unreachable or refused)"
        if len(self.environment_failures) >= INFRA_FAILURES_TO_STOP:
            return (f"{INFRA_FAILURES_TO_STOP} tasks in a row could not run for the same reason; the last: "
                    f"{self.environment_failures[-1]}")
        return self.spend.reason()

    # -- running --------------------------------------------------------------------

    async def run(self) -> RepoReport:
        try:
            if self.parallel == 1:  # one worker on this loop
                await self.worker(Slot("worker-1"))
                return self.report
            # Alone in the run, each worker gets an event loop of its own; beside other
            # repositories, the run-wide task slots are the main loop's.
            start = self.worker if self.slots else self.worker_in_own_loop
            with litellm_home(asyncio.get_running_loop()):  # model calls stay on this loop
                async with anyio.create_task_group() as group:
                    for n in range(self.parallel):
                        group.start_soon(start, Slot(f"worker-{n + 1}"))
        finally:
            await self.end(f"run {self.report.run_id}")
        return self.report

    async def run_one(self, task: Task) -> TaskOutcome:
        """`do-one-task`: `task` alone, in a worktree of its own, landed when it closes."""
        self.running.add(task.id)
        try:
            return await self.run_task(task, Slot("worker-1"))
        finally:
            await self.end(task.id)

    async def end(self, label: str) -> None:
        """The worktrees removed and the backlog committed, however the run ends: one
        bookkeeping commit per run, whatever the workers (one per task would serialise
        parallel workers on the main checkout, and costs a commit's git work per task).
        Each task's state is on disk as it ends (the board's atomic, durable writes); a
        run killed before this commit leaves it uncommitted, and the next run's commit
        takes it (orchestrator/git/bookkeeping.py: a killed run's task states are
        goldenloop's)."""
        with anyio.CancelScope(shield=True):
            await self.on_main(self.remove_worktrees)
            await self.on_main(self.session.commit_bookkeeping, label)

    def nothing_ready(self) -> str:
        """Why no task is left to run: an empty backlog, or tasks that cannot run (as the fleet says it)."""
        left = [t for t in self.session.board.tasks() if t.status != "closed"]
        if not left:
            return "backlog empty"
        return f"no task left ready: {len(left)} not closed, blocked or waiting on a task that is not closed"

    async def worker(self, slot: Slot) -> None:
        while not self.report.stop_reason:  # another worker may have stopped the run
            reason = self.stop_reason()
            if reason:
                self.report.stop_reason = self.report.stop_reason or reason
                return
            task = self.claim_next()
            if isinstance(task, str):  # the task count was reached by another worker's claim
                self.report.stop_reason = self.report.stop_reason or task
                return
            if task is None:
                if self.running:  # another worker may close a dependency
                    await anyio.sleep(0.05)
                    continue
                self.report.stop_reason = self.report.stop_reason or self.nothing_ready()
                return
            try:
                async with self.slots or contextlib.nullcontext():
                    outcome = await self.run_with_deadline(task, slot)
            finally:
                self.running.discard(task.id)
            self.record(outcome)
            if outcome.status == "usage_limit":
                await self.wait_out_limit(outcome)

    async def wait_out_limit(self, outcome: TaskOutcome) -> None:
        """A spent usage window: wait until it resets, then the same task again (it is open,
        and first in line); past the run's deadline, the run stops there instead."""
        resume_at = outcome.resume_at if outcome.resume_at is not None else time.time() + LIMIT_UNSAID_WAIT_S
        wait = max(resume_at - time.time(), 0.0)
        left = self.budget.seconds_left(self.own_seconds)
        runlog = self.session.runlog
        if left is not None and wait >= left:
            self.report.stop_reason = self.report.stop_reason or (
                f"a usage limit that resets at {_clock(resume_at)}, after the run's time budget ends")
            return
        runlog.event("waiting", taskId=outcome.task_id, until=resume_at, seconds=round(wait),  # type: ignore[union-attr]
                     reason=outcome.reason)
        await anyio.sleep(wait)

    async def worker_in_own_loop(self, slot: Slot) -> None:
        """`worker` on an event loop in a thread of its own: what blocks one worker's loop
        (an fsync before a risky step, a process being started, a rename) no longer holds
        up the others. Cancelling this cancels the worker, and waits until it has put its
        task back."""
        portal_cm = anyio.from_thread.start_blocking_portal()
        portal = portal_cm.__enter__()
        future: Future[None] | None = None
        try:
            future = portal.start_task_soon(self.worker, slot)
            await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)
        finally:
            if future is not None:
                future.cancel()  # a no-op once it has ended
            with anyio.CancelScope(shield=True):  # the worker puts its task back first
                await anyio.to_thread.run_sync(portal_cm.__exit__, None, None, None)

    def next_task(self) -> Task | None:
        return next((t for t in self.session.board.ready() if t.id not in self.running), None)

    def claim_next(self) -> Task | str | None:
        """The next ready task, claimed and counted against the task count; the reason
        when the count is reached; None when no task is ready now."""
        with self.claims:
            reason = self.task_count_reason()
            if reason:
                return reason
            task = self.next_task()
            if task is not None:
                self.running.add(task.id)
                self.started += 1
                self.budget.started_tasks += 1
            return task

    async def run_with_deadline(self, task: Task, slot: Slot) -> TaskOutcome:
        left = self.budget.seconds_left(self.own_seconds)
        started = time.monotonic()
        with anyio.move_on_after(left if left is not None else float("inf")) as scope:
            return await self.run_task(task, slot)
        assert scope.cancelled_caught
        self.session.runlog.event("task_stopped", taskId=task.id, reason="time budget")  # type: ignore[union-attr]
        # A planned stop, like the cost budget's: leave the backlog committed, not dirty (on
        # the main checkout, where another worker may be merging).
        await self.on_main(self.session.commit_bookkeeping, task.id)
        self.report.stop_reason = self.report.stop_reason or "time budget used up"
        return TaskOutcome(task.id, "interrupted", "time budget used up; the task was put back to open",
                           duration_s=time.monotonic() - started)

    async def run_task(self, task: Task, slot: Slot) -> TaskOutcome:
        if slot.tree is None or slot.repo is None:
            slot.tree = await self.on_main(self.add_worktree, slot.name)
            slot.repo = await anyio.to_thread.run_sync(Repo, slot.tree.path)
        tree, repo = slot.tree, slot.repo
        # The worktree is the worker's own: resetting it needs no lock on the main checkout.
        # A close in it is not done until the task's commits land: that is written down
        # first, its fsync while git resets the worktree.
        base = self.session.repo.head()
        async with anyio.create_task_group() as group:
            group.start_soon(anyio.to_thread.run_sync, landing.expect, self.session.project_dir, task.id)
            await anyio.to_thread.run_sync(self.worktrees.start, tree, task.id, base)
        outcome = await self.session.run_task(task, repo=repo, limits=[self.spend], bookkeeping=False)
        if outcome.status == "closed" and outcome.commits:
            await self.integrate(task, tree, outcome)
        else:
            landing.landed(self.session.project_dir, task.id)
        return outcome

    def add_worktree(self, name: str) -> Worktree:
        tree = self.worktrees.add(name)
        self.trees.append(tree)  # in this thread: an interrupted run still finds it to remove
        return tree

    def remove_worktrees(self) -> None:
        while self.trees:
            self.worktrees.remove(self.trees.pop())

    async def on_main(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Work on the main checkout: one at a time, off the event loop so that the
        other workers' tests keep running meanwhile."""
        def locked() -> T:
            with self.main_lock:
                return fn(*args, **kwargs)

        return await anyio.to_thread.run_sync(locked)

    async def integrate(self, task: Task, tree: Worktree, outcome: TaskOutcome) -> None:
        """Bring a closed task's commits onto the base branch, or block the task.

        Its checks passed on the tree it started from. When other tasks landed meanwhile,
        they run again on its commits on top of theirs, off the lock, before anything
        lands: each change may pass alone and the two fail together.
        """
        root = self.session.project_dir
        while True:
            try:
                onto = await self.on_main(self.worktrees.onto_tip, tree)
                failed = await self.checks_on_top(task, tree, onto, outcome) if onto.moved else None
                if failed:
                    await anyio.to_thread.run_sync(self.worktrees.keep, tree, onto.head)
                    return self.block_landing(task, tree, outcome, failed, "combined_checks_failed")
                commits = await self.on_main(self.worktrees.land, tree, onto,
                                             functools.partial(landing.landing, root, task.id))
            except NotLanded as exc:
                return self.block_landing(task, tree, outcome, str(exc), "landing_blocked")
            except MergeConflict as exc:
                return self.block_landing(task, tree, outcome, f"merge conflict: {exc}", "merge_conflict")
            if commits is not None:
                break  # else another task landed during the checks: again on top of it
        outcome.commits = commits
        self.session.board.update(task.id, commits=commits)
        landing.landed(root, task.id)

    async def checks_on_top(self, task: Task, tree: Worktree, onto: Landing, outcome: TaskOutcome) -> str | None:
        """Why the checks fail on the task's commits on top of the tasks that landed since it
        started (`orchestrator.checks.combined`); None when they pass."""
        session = self.session
        changed = (await anyio.to_thread.run_sync(functools.partial(
            session.repo.git, "diff", "--name-only", "-z", "--no-renames", tree.base, onto.head))).split("\0")
        globs = tuple(session.config.retry.test_globs or DEFAULT_TEST_GLOBS)
        run = await combined_failure(session.repo, session.wiring.judges, session.config, onto.head,
                                     project_dir=session.project_dir, task_id=task.id, allowed=outcome.others,
                                     first=[p for p in changed if p and is_test_path(p, globs)])
        if run is None:
            return None
        branch = self.worktrees.branch_name()
        return (combined_reason(run, branch, tree.branch, outcome.others)
                + f", and `goldenloop reopen {task.id}` runs it again on {branch} as it is now")

    def block_landing(self, task: Task, tree: Worktree, outcome: TaskOutcome, reason: str, event: str) -> None:
        """The loop closed the task in the worktree; blocked now, so not closed at any time."""
        outcome.status, outcome.reason, outcome.commits = "blocked", reason, []  # none on the user's branch
        self.session.board.update(task.id, status="blocked", close_reason=redact(reason), closed_at=None)
        self.session.runlog.event(event, taskId=task.id, branch=tree.branch, reason=reason)  # type: ignore[union-attr]
        landing.landed(self.session.project_dir, task.id)

    def record(self, outcome: TaskOutcome) -> None:
        with self.claims:  # workers on loops of their own may end tasks at the same time
            self._record(outcome)

    def _record(self, outcome: TaskOutcome) -> None:
        self.report.outcomes.append(outcome)
        self.infra_failures = self.infra_failures + 1 if outcome.status == "model_unavailable" else 0
        if outcome.status == "usage_limit":  # not the task's doing: its next try is not counted
            self.started -= 1
            self.budget.started_tasks -= 1
        self.environment_failures = same_environment_failure(self.environment_failures, outcome)
        if outcome.status == "budget":
            self.report.stop_reason = self.report.stop_reason or outcome.reason


@dataclass
class Slot:
    """A parallel worker's own worktree, added at its first task and reused after."""

    name: str
    tree: Worktree | None = None
    repo: Repo | None = None


# -- the command -----------------------------------------------------------------------


@dataclass
class OvernightOptions:
    dirs: list[Path]
    overrides: Overrides
    budget: Budget
    parallel: int | None = None
    listeners: list[Listener] = field(default_factory=list)
    reports: list[RepoReport] = field(default_factory=list)  # filled as the run goes


async def run_overnight_async(options: OvernightOptions) -> list[RepoReport]:
    """Every repository in turn, or all at once with --parallel K (K tasks in flight across
    them); refusals are reported, never raised."""
    run_id = new_run_id()
    if (options.parallel or 1) > 1 and len(options.dirs) > 1:
        slots = anyio.CapacityLimiter(options.parallel or 1)
        async with anyio.create_task_group() as group:
            for directory in options.dirs:
                group.start_soon(_run_repository, directory.resolve(), run_id, options, slots)
        return options.reports
    for number, directory in enumerate(options.dirs):
        await _run_repository(directory.resolve(), run_id, options)
        if options.budget.max_tasks is not None and options.budget.started_tasks >= options.budget.max_tasks:
            for unreached in options.dirs[number + 1 :]:  # said, so that no repository is forgotten
                options.reports.append(RepoReport(unreached.resolve(), run_id, started=False,
                                                  stop_reason=f"task count reached ({options.budget.max_tasks})"))
            break
    return options.reports


async def _run_repository(directory: Path, run_id: str, options: OvernightOptions,
                          slots: anyio.CapacityLimiter | None = None) -> None:
    runlog = RunLog(directory, run_id, persist=False)  # a refused folder gets no files
    for listener in options.listeners:
        # Repositories side by side share a screen, and their task ids may be the same.
        runlog.subscribe(listener if slots is None else _naming(listener, directory.name))
    session = ProjectSession(directory, options.overrides, runlog, run_meter=options.budget.meter)
    try:
        session.open()
    except UserError as exc:
        session.close()
        runlog.event("repository_refused", projectDir=str(directory), reason=str(exc))
        options.reports.append(
            RepoReport(directory, run_id, stop_reason="refused", refused=str(exc), exit_code=exc.exit_code)
        )
        return
    try:
        for notice in session.notices:
            runlog.event("notice", message=notice)
        session.notices.clear()
        parallel = options.parallel or session.config.parallel_execution
        run = RepoRun(session, options.budget, parallel, slots)
        if run.max_cost() is not None:
            unknown = [m for m in session.models_in_use() if not price_known(m)]
            if unknown:
                reason = f"a cost budget is set but the price of {', '.join(unknown)} is unknown"
                runlog.event("repository_refused", projectDir=str(directory), reason=reason)
                options.reports.append(
                    RepoReport(directory, run_id, stop_reason="refused", refused=reason, exit_code=2)
                )
                return
        runlog.event("repository_started", projectDir=str(directory), parallel=parallel)
        options.reports.append(run.report)
        try:
            await run.run()
        finally:
            _write_summaries(session, run.report)
    finally:
        session.close()


def _naming(listener: Listener, repo: str) -> Listener:
    return lambda event: listener({**event, "repo": repo})


def _write_summaries(session: ProjectSession, report: RepoReport) -> None:
    stop = report.stop_reason = report.stop_reason or "interrupted"  # the summary file says it too
    write_progress(session.project_dir, report.run_id, report.outcomes, stop_reason=stop, meter=session.run_meter)
    write_morning_report(session.project_dir, report.run_id, report.outcomes, stop_reason=stop,
                         meter=session.run_meter, header=RunHeader.of(session.project_dir, session.config))
    path = Layout(session.project_dir).run_summary(report.run_id)
    atomic_write(path, orjson.dumps(report.summary(), option=orjson.OPT_INDENT_2) + b"\n", durable=False)
    session.runlog.event("run_stopped", reason=stop, summary=str(path))  # type: ignore[union-attr]


def exit_code_for(reports: list[RepoReport]) -> int:
    refused = [r.exit_code for r in reports if r.refused]
    if refused:
        return max(refused)
    if any(o.status != "closed" and not _waited_out(o, r.outcomes) for r in reports for o in r.outcomes):
        return EXIT_BLOCKED
    return EXIT_DONE


def _waited_out(outcome: TaskOutcome, outcomes: list[TaskOutcome]) -> bool:
    """A usage limit the run waited out: the same task ran again after it."""
    at = next(n for n, o in enumerate(outcomes) if o is outcome)
    return outcome.status == "usage_limit" and any(o.task_id == outcome.task_id for o in outcomes[at + 1:])


def same_environment_failure(seen: list[str], outcome: TaskOutcome) -> list[str]:
    """The run of tasks that ended on one environment failure (not logged in, a program
    missing), with this outcome counted: a night spent on it would block every task."""
    if outcome.status != "blocked" or outcome.stop_reason != StopReason.ENVIRONMENT:
        return []
    same = not seen or _without_ids(seen[-1]) == _without_ids(outcome.reason)
    return [*seen, outcome.reason] if same else [outcome.reason]


def _without_ids(reason: str) -> str:
    return re.sub(r"\bT-[\w.-]+|\S+\.(?:md|patch)\b|after \d+ attempt", "", reason)
