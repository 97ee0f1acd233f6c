"""A repository opened for one run: from "a folder" to "a GoldenLoop ready to run a task".

`ProjectSession.open` reads top to bottom: the repository and its config (session/opening.py),
the lock, then what a killed run left put right (recovery/killed_run.py) before the dirty
tree is judged; `run_task` builds each task's loop (session/wiring.py), runs it, and
commits the bookkeeping. Both `do-one-task` and `overnight` use it. Every problem a user
can cause ends in a `UserError` carrying one sentence and an exit code.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from orchestrator.budget import BudgetExceeded, Ledger
from orchestrator.checks.convergence import StopReason
from orchestrator.config import ProjectConfig
from orchestrator.git.bookkeeping import Pending
from orchestrator.git.repo import OPENAGENTS, Repo, RepoError
from orchestrator.layout import Layout
from orchestrator.lock import AgentLock
from orchestrator.loop.outcome import TaskOutcome
from orchestrator.processes import become_subreaper
from orchestrator.recovery.killed_run import KilledRun
from orchestrator.runlog import RunLog
from orchestrator.session.errors import EXIT_NO_TASK, EXIT_USAGE, UserError, as_user_error
from orchestrator.session.housekeeping import ensure_runtime_ignored, is_memory, prune_memory
from orchestrator.session.opening import (
    Overrides,
    check_agent_program,
    check_api_keys,
    load_project_config,
    memory_url_of,
    open_board,
    own_model_notice,
    refuse_dirty_tree,
    take_lock,
)
from orchestrator.session.wiring import Wiring
from orchestrator.tasks import Task, TaskBoard
from orchestrator.tempfiles import sweep_dead
from reflection.fileio import atomic_write
from reflection.llm import ChatModel, preload_litellm
from reflection.meter import Meter
from reflection.redaction_policy import policy_in_force
from reflection.secret_values import secrets_known
from reflection.secrets_in_reach import secrets_in_reach
from reflection.text import one_line


@dataclass
class ProjectSession:
    project_dir: Path
    overrides: Overrides = field(default_factory=Overrides)
    runlog: RunLog | None = None
    config: ProjectConfig = field(init=False)
    repo: Repo = field(init=False)
    board: TaskBoard = field(init=False)
    notices: list[str] = field(default_factory=list)
    run_meter: Meter = field(default_factory=Meter)
    # What was uncommitted under .openagents/ as the run began: never committed as goldenloop's.
    pending: Pending = field(default_factory=lambda: Pending(frozenset(), {}))
    wiring: Wiring = field(init=False)
    killed_run: KilledRun = field(init=False)
    _lock: AgentLock | None = None
    _closing: ExitStack = field(default_factory=ExitStack)

    # -- open -------------------------------------------------------------------------

    def open(self) -> ProjectSession:
        """Everything that can refuse the run, in the order a user would fix it."""
        if not self.project_dir.is_dir():
            raise UserError(f"{self.project_dir} is not a folder")
        self.repo = as_user_error(lambda: Repo(self.project_dir), EXIT_USAGE)
        self.project_dir = self.repo.root  # project.json is read from the top, even from a subfolder
        # Masked by value in everything the run writes, from its first line on.
        self._closing.enter_context(secrets_known(secrets_in_reach(self.project_dir)))
        self.repo.refresh_if_racy(Layout(self.project_dir).reflections)  # a fresh clone of a committed memory
        self.pending = as_user_error(lambda: Pending.note(self.repo), EXIT_USAGE)  # before the run writes there
        self.config = load_project_config(self.project_dir, self.overrides, self.notices)
        # The project's own domains, patterns and names, in every redaction from here on.
        self._closing.enter_context(policy_in_force(self.config.redaction.policy()))
        memory_url = memory_url_of(self.config, self.overrides)
        if self.runlog is None:
            self.runlog = RunLog(self.project_dir)
        self.board = as_user_error(lambda: open_board(self.project_dir, self.config, self.notices), EXIT_USAGE)
        self.wiring = Wiring(self.project_dir, self.config, self.repo, self.board, self.runlog, self.run_meter,
                             memory_url)
        check_api_keys(self.config, self.wiring.models_in_use())
        check_agent_program(self.config, self.project_dir)
        ensure_runtime_ignored(self.project_dir)
        self._lock = take_lock(self.project_dir, self.notices)
        become_subreaper()  # children that escape their session stay ours to kill
        sweep_dead()  # prompt files and scratch folders of runs killed before they could remove them
        try:
            self._put_right_what_a_killed_run_left()
            self._tend_memory()
        except BaseException:
            self.close()
            raise
        return self

    def _put_right_what_a_killed_run_left(self) -> None:
        assert self.runlog is not None
        killed = self.killed_run = KilledRun(self.repo, self.board, self.runlog, self.notices)
        killed.stop_leftover_processes()  # a killed run's checks must not write on
        killed.remove_dead_worktrees()
        killed.finish_killed_commits()
        killed.finish_killed_landings()
        refuse_dirty_tree(self.repo, self.pending, allow_dirty=self.overrides.allow_dirty, notices=self.notices)
        self.runlog.attach(self.project_dir)  # a usable project, and ours: its run log may be written
        self.notices.extend(self.board.warnings)
        killed.recover()
        killed.close_landed_by_hand()

    def _tend_memory(self) -> None:
        if self.config.reflexion.enabled:
            self.wiring.project_memory()  # an unreachable shared memory stops the run here, not mid-task
        if self.config.task_reflection_on:
            self.wiring.task_reflector()  # so do a task notes' store or strategy that cannot be made
        elif self.config.memory.task_reflection:
            self.wiring.check_task_choice()
            self.notices.append("memory.taskReflection is on but no task notes will be written: "
                                "they need a model (reflexion.enabled and reflexion.useLLM)")
        prune_memory(self.project_dir, self.config, self.wiring.memory_url, self.wiring.opened_memory,
                     self.notices)
        if self.config.executor.kind != "builtin":  # an agent program: said once a run
            from orchestrator.executors.confinement import sandbox_notice

            notice = sandbox_notice(self.config.executor.sandbox)
            if notice:
                self.notices.append(notice)
            if notice := own_model_notice(self.config):
                self.notices.append(notice)

    def close(self) -> None:
        self._closing.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        if hasattr(self, "repo"):
            self.repo.close()
        if hasattr(self, "wiring"):
            self.wiring.close()

    def __enter__(self) -> ProjectSession:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- select and run ---------------------------------------------------------------

    def select(self, task_id: str | None) -> Task:
        if task_id is None:
            task = self.board.next_ready()
            if task is None:
                raise UserError("no ready task in .openagents/tasks.jsonl", EXIT_NO_TASK)
            return task
        task = as_user_error(lambda: self.board.get(task_id), EXIT_USAGE)
        if task in self.board.ready():
            return task
        if task.status in ("closed", "blocked"):
            raise UserError(_how_to_reopen(task, archived=task_id not in self.board.statuses()), EXIT_NO_TASK)
        waiting = [d.id for d in task.deps if d.type in ("blocks", "parent-child") and not self.board.is_closed(d.id)]
        raise UserError(f"task {task_id} is waiting for {', '.join(waiting)} to be closed", EXIT_NO_TASK)

    def models_in_use(self, tasks: Sequence[Task] | None = None) -> list[str]:
        """The models a run of `tasks` can call (default: every task not yet closed)."""
        return self.wiring.models_in_use(tasks)

    def base_model(self, name: str) -> ChatModel:
        return self.wiring.base_model(name)

    async def run_task(
        self,
        task: Task,
        *,
        repo: Repo | None = None,
        limits: Sequence[Ledger] = (),
        bookkeeping: bool = True,
    ) -> TaskOutcome:
        """Run one task; on interruption put the tree and the task back, then re-raise.

        `repo` is a worktree for parallel runs (then the caller merges and commits the
        bookkeeping once the task's commits are on the base branch). `limits`: the run's
        spending ledgers (see `Wiring.build_loop`).
        """
        meter, started = Meter(), time.monotonic()
        if self.wiring.calls_model_first(task):  # the import takes seconds: start it while the checks run
            preload_litellm()
        loop = self.wiring.build_loop(meter, repo, limits)
        try:
            outcome = await loop.run_task(task)
        except BaseException as exc:
            refused = budget_refusal(exc)
            if refused is None:
                self.killed_run.restore_task(self.board.get(task.id))
                raise
            # A model call the budget could not cover was refused, and never made.
            outcome = self._put_back_for_budget(task, repo, str(refused), meter, started)
        if bookkeeping:
            self.commit_bookkeeping(task.id)
        return outcome

    def _put_back_for_budget(
        self, task: Task, repo: Repo | None, reason: str, meter: Meter, started: float
    ) -> TaskOutcome:
        """The task stops as a budget stop before an attempt stops it: its subtask's tree
        restored and put back to pending (stop reason `budget`), the task back to open."""
        self.killed_run.restore_task(self.board.get(task.id), reason=reason, stop_reason=StopReason.BUDGET)
        return TaskOutcome(task.id, "budget", reason, meter=meter, duration_s=time.monotonic() - started,
                           stop_reason=StopReason.BUDGET)

    def commit_bookkeeping(self, task_id: str) -> str | None:
        """Commit `.openagents/` state in a commit of its own, never with code, and only what
        goldenloop wrote (orchestrator/git/bookkeeping.py): never a change of yours."""
        if not self.config.commit_bookkeeping:
            return None
        dirty = [p for p in self.repo.dirty_paths_under(OPENAGENTS) if not p.endswith(".lock") and not is_memory(p)]
        paths, contents = self.pending.to_commit(self.repo, dirty)  # goldenloop's own changes only
        if not paths:
            return None
        marker = Layout(self.project_dir).bookkeeping_marker
        try:
            sha = self.repo.commit(paths, f"{task_id}: goldenloop bookkeeping", contents=contents,
                                   before_ref=lambda old, new: atomic_write(marker, orjson.dumps(
                                       {"paths": paths, "old": old, "new": new})))
        except RepoError as exc:
            self.notices.append(f"bookkeeping was not committed: {exc}")
            return None
        finally:
            marker.unlink(missing_ok=True)
        assert self.runlog is not None
        self.runlog.event("bookkeeping_committed", taskId=task_id, sha=sha, files=len(paths))
        return sha


def budget_refusal(exc: BaseException) -> BudgetExceeded | None:
    """The budget refusal `exc` is, or is all that it holds (task groups wrap what they
    raise); None for anything else."""
    if isinstance(exc, BudgetExceeded):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        refused, rest = exc.split(BudgetExceeded)
        while refused is not None and rest is None:
            first = refused.exceptions[0]
            if isinstance(first, BudgetExceeded):
                return first
            refused = first if isinstance(first, BaseExceptionGroup) else None
    return None


def _how_to_reopen(task: Task, *, archived: bool) -> str:
    """Why a closed or blocked task asked for by id does not run, and the command that lets it."""
    if archived:  # `goldenloop reopen` does not reach the archive
        return f"task {task.id} is archived (closed long ago); add it anew with goldenloop add to do it again"
    if task.status == "closed":
        return f"task {task.id} is closed already; goldenloop reopen {task.id} lets it run again"
    why = one_line(task.close_reason, 600) if task.close_reason else "no reason recorded"
    if "goldenloop reopen" in why:  # the reason says already what to do
        return f"task {task.id} is blocked: {why}"
    return (f"task {task.id} is blocked ({why}); goldenloop reopen {task.id} lets it run again "
            "(with --forget it starts afresh)")
