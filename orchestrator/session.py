"""Orient and wire: everything between "a folder" and "a GoldenLoop ready to run a task".

A `ProjectSession` opens one repository for one run: it loads the config (with the
command line's overrides), refuses a dirty tree, takes the agent lock, checks the model's
API key before any work, recovers what a killed run left behind, and builds the loop's
parts. Both `do-one-task` and `overnight` use it. Every problem a user can cause ends
in a `UserError` carrying one sentence and an exit code.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from orchestrator.bookkeeping import Pending
from orchestrator.budget import BudgetExceeded, Ledger, SpendLimit, combine
from orchestrator.checks.convergence import StopReason
from orchestrator.config import (
    ConfigError,
    ProjectConfig,
    PromptTemplates,
    load_config,
    memory_store_url,
    prompt_templates,
    url_problem,
)
from orchestrator.executors.base import Executor
from orchestrator.executors.program import missing_agent_program
from orchestrator.journal import Journal, early_sessions_path, stop_leftovers
from orchestrator.layout import Layout
from orchestrator.lock import AgentLock, LockHeld, describe_holder
from orchestrator.loop.decompose import is_small
from orchestrator.loop.golden import GoldenLoop
from orchestrator.loop.outcome import TaskOutcome
from orchestrator.loop.parts import LoopParts
from orchestrator.loop.plan import Subtask, SubtaskPlan
from orchestrator.loop.project_memory import ProjectMemory, open_project_memory
from orchestrator.metering import MeteredModel
from orchestrator.processes import become_subreaper
from orchestrator.recovered import Keeper, kept_event
from orchestrator.repo import OPENAGENTS, Repo, RepoError
from orchestrator.runlog import RunLog
from orchestrator.task_archive import archive_closed_tasks
from orchestrator.tasks import Task, TaskBoard, TaskFileError
from orchestrator.tempfiles import sweep_dead
from reflection.embeddings import litellm_embedder
from reflection.fileio import LockTimeout, MemoryFileError, atomic_write
from reflection.llm import (
    ChatModel,
    LiteLLMModel,
    missing_api_key,
    preload_litellm,
    price_known,
)
from reflection.meter import Meter
from reflection.postgres.connection import PostgresUnavailable
from reflection.service import ReflectionService
from reflection.store import JsonlReflectionStore, ReflectionStore
from reflection.task_reflector import TaskReflector
from reflection.task_store import JsonTaskReflectionStore
from reflection.text import one_line

if TYPE_CHECKING:
    from orchestrator.checks.review import ReviewGate
    from orchestrator.executors.format_choice import FormatChooser

EXIT_DONE, EXIT_BLOCKED, EXIT_USAGE, EXIT_NO_TASK, EXIT_REFUSED, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130


class UserError(Exception):
    """A problem the user can fix; `str()` is one sentence, `exit_code` as docs/ARCHITECTURE.md lists them."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class MemoryUnavailable(UserError):
    """The shared memory's database cannot be reached now: a fleet worker tries again later,
    where a wrong config (a plain UserError) would fail the same way every time."""


@dataclass
class Overrides:
    """Command-line switches that win over project.json and the environment."""

    model: str | None = None
    reflexion: bool | None = None
    max_retries: int | None = None
    allow_dirty: bool = False
    api_base: str | None = None  # --api-base: wins over model.apiBase
    # The fleet worker's --memory: a postgresql:// URL that wins over memory.store; None
    # or "project": what the project's config (and GOLDENLOOP_MEMORY_STORE) says.
    memory_store: str | None = None


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
    _lock: AgentLock | None = None
    _prices_known: bool | None = None
    _memory: ProjectMemory | None = None
    memory_url: str | None = None  # memory.store's PostgreSQL URL; None: the JSONL files
    # What was uncommitted under .openagents/ as the run began: never committed as goldenloop's.
    pending: Pending = field(default_factory=lambda: Pending(frozenset(), {}))

    # -- orient ---------------------------------------------------------------------

    def open(self) -> ProjectSession:
        """Everything that can refuse the run, in the order a user would fix it."""
        if not self.project_dir.is_dir():
            raise UserError(f"{self.project_dir} is not a folder")
        self.repo = _call(lambda: Repo(self.project_dir), EXIT_USAGE)
        self.project_dir = self.repo.root  # project.json is read from the top, even from a subfolder
        self.pending = _call(lambda: Pending.note(self.repo), EXIT_USAGE)  # before the run writes there
        self.config = self._load_config()
        self.memory_url = self._memory_url()
        if self.runlog is None:
            self.runlog = RunLog(self.project_dir)
        self.board = _call(self._open_board, EXIT_USAGE)
        self._check_api_keys()
        if problem := missing_agent_program(self.config.executor, self.project_dir):
            raise UserError(problem)  # before any attempt: a missing program is the config's fault, not the task's
        ensure_runtime_ignored(self.project_dir)
        self._take_lock()
        become_subreaper()  # children that escape their session stay ours to kill
        sweep_dead()  # prompt files and scratch folders of runs killed before they could remove them
        try:
            self._stop_leftover_processes()  # a killed run's agent must not write on
            self._finish_killed_commits()
            self._refuse_dirty_tree()
            self.runlog.attach(self.project_dir)  # a usable project, and ours: its run log may be written
            self.notices.extend(self.board.warnings)
            self.recover()
            if self.config.reflexion.enabled:
                self._project_memory()  # an unreachable shared memory stops the run here, not mid-task
            self._prune_memory()
        except BaseException:
            self.close()
            raise
        return self

    def _open_board(self) -> TaskBoard:
        """The backlog, its oldest closed tasks first moved to the archive (see task_archive)."""
        layout = Layout(self.project_dir)
        try:
            moved = archive_closed_tasks(layout.tasks, layout.task_archive, over=self.config.archive_closed_over)
        except OSError as exc:  # the backlog works as well unarchived: say so and go on
            self.notices.append(f"closed tasks were not moved to {layout.task_archive}: {exc.strerror or exc}")
            moved = 0
        if moved:
            self.notices.append(f"moved {moved} closed task(s) from tasks.jsonl to .openagents/archive/")
        return TaskBoard(layout.tasks, archive=layout.task_archive)

    def _load_config(self) -> ProjectConfig:
        try:
            loaded = load_config(self.project_dir)
        except ConfigError as exc:
            raise UserError(str(exc)) from None
        self.notices.extend(loaded.warnings)
        config, o = loaded.config, self.overrides
        reflexion = config.reflexion
        if o.reflexion is not None:
            reflexion = reflexion.model_copy(update={"enabled": o.reflexion})
        if o.max_retries is not None:
            reflexion = reflexion.model_copy(update={"max_retries": o.max_retries})
        update: dict = {"reflexion": reflexion}
        if o.model:
            update["default_model"] = o.model
        if o.api_base:
            problem = url_problem(o.api_base)
            if problem:
                raise UserError(f"--api-base {problem}")
            update["model"] = config.model.model_copy(update={"api_base": o.api_base})
        config = config.model_copy(update=update)
        if not (config.test_commands or config.typecheck_commands):
            where = "project.json sets no" if loaded.path else "there is no .openagents/project.json to set"
            raise UserError(
                f"{where} testCommands or typecheckCommands, and without them no attempt could be "
                "checked before it is committed; add at least one command (see project.json.example)"
                + loaded.hint_for("testCommands", "typecheckCommands")
            )
        return config

    def _memory_url(self) -> str | None:
        """The PostgreSQL memory the run uses: the worker's --memory, else memory.store."""
        override = self.overrides.memory_store
        if override and override != "project":
            return override
        try:
            return memory_store_url(self.config.memory.store)
        except ConfigError as exc:
            raise UserError(str(exc)) from None

    def _refuse_dirty_tree(self) -> None:
        if yours := self.pending.yours():  # never refused: a waiver in project.json is meant for this run
            self.notices.append(f"your uncommitted changes to {', '.join(yours[:5])}{' ...' if len(yours) > 5 else ''} "
                                "are used as they are and never committed by goldenloop: commit them yourself")
        dirty, left = self.repo.dirty_paths(), set()
        if dirty:  # what a killed run's attempt left is not the user's: recover() undoes it
            left = self._left_by_killed_run()
            dirty = [p for p in dirty if p not in left]
        if not dirty:
            return
        if self.overrides.allow_dirty:
            self.notices.append(
                f"working tree has {len(dirty)} uncommitted change(s); they are left alone "
                "and never committed (--allow-dirty)"
            )
            return
        shown = ", ".join(dirty[:5]) + (" ..." if len(dirty) > 5 else "")
        killed = ""
        if left:  # say so, or the user takes the dead run's files for theirs and commits them
            theirs = ", ".join(sorted(left)[:5]) + (" ..." if len(left) > 5 else "")
            killed = (f"; the changes to {theirs} were made by a killed run and will be undone "
                      "by the next run: leave them out of your commit")
        raise UserError(
            f"the working tree has uncommitted changes of yours ({shown}); commit or stash them, "
            f"or pass --allow-dirty{killed}",
            EXIT_REFUSED,
        )

    def _in_progress(self) -> list[Task]:
        return self.board.with_status("in_progress")

    def _stop_leftover_processes(self) -> None:
        """Kill whatever a killed run's checks or attempt left running (their sessions are
        in the journal)."""
        for task in self._in_progress():
            if stop_leftovers(self.project_dir, task.id):
                self.notices.append(f"stopped the processes a killed run of {task.id} left running")
            early_sessions_path(self.project_dir, task.id).unlink(missing_ok=True)  # stopped: nothing left to learn

    def _left_by_killed_run(self) -> set[str]:
        """Paths the unfinished subtasks of tasks left in progress changed (see recover)."""
        head, paths = self.repo.head(), set()
        for task in self._in_progress():
            for subtask, journal in self._unfinished(task, self.repo):
                commit = journal.commit if journal is not None else None
                if commit is not None and commit["new"] == head:  # committed (finished at open): nothing left
                    continue
                if subtask.base_commit == head:
                    ours, _, _ = self._killed_attempt(self.repo, subtask, journal)
                    paths |= ours
        return paths

    def _unfinished(self, task: Task, repo: Repo) -> list[tuple[Subtask, Journal | None]]:
        plan = SubtaskPlan.load(Layout(self.project_dir).plan(task.id))
        journal = Journal.load(self.project_dir, task.id)
        return [(s, journal if journal and journal.subtask_id == s.id else None)
                for s in (plan.subtasks if plan else []) if s.status == "in_progress" and s.base_commit]

    @staticmethod
    def _killed_attempt(repo: Repo, subtask: Subtask, journal: Journal | None) -> tuple[set[str], set[str], list[str]]:
        """(paths the killed run changed, paths changed since by the user, paths it cannot tell)."""
        assert subtask.base_commit is not None
        changed = repo.changed_files(subtask.base_commit, set(subtask.dirty_before))
        if journal is None:  # a run from before the journal: everything it changed was its own
            return set(changed), set(), []
        verdicts = {rel: journal.written_by_run(repo.root, rel) for rel in changed}
        ours = {rel for rel, v in verdicts.items() if v}
        return ours, {rel for rel, v in verdicts.items() if v is False}, sorted(r for r, v in verdicts.items() if v is None)

    def models_in_use(self, tasks: Sequence[Task] | None = None) -> list[str]:
        """The models a run of `tasks` can call (default: every task not yet closed).

        The main model for the builtin executor, or for planning a task long enough to be
        decomposed; the reflection model when reflections are written by a model (task
        reflection included); the review model when a model judges. A command executor or
        an agent preset with heuristic reflections, no review and short tasks calls none.
        """
        c = self.config
        tasks = self.board.with_status("open", "in_progress") if tasks is None else tasks
        names = []
        if c.executor.kind == "builtin" or any(self._plans(task) for task in tasks):
            names.append(self.resolve_model(c.default_model))
        if c.reflexion.enabled and c.reflexion.use_llm:
            names.append(self.resolve_model(c.reflection_model))
        if c.review.enabled and c.review.use_llm:
            names.append(self.resolve_model(c.review_model))
        return list(dict.fromkeys(names))

    def _plans(self, task: Task) -> bool:
        """Whether `task` is decomposed by a model call (decomposeMinChars 0: never)."""
        min_chars = self.config.decompose_min_chars
        return min_chars > 0 and not is_small(task, min_chars)

    def may_call_model(self, task: Task) -> bool:
        """Whether running `task` can make a model call (see `models_in_use`)."""
        return bool(self.models_in_use([task]))

    def _check_api_keys(self) -> None:
        """Refuse, before any work, a run whose model calls would all fail for want of a key.

        Only models that can be called are checked, from the environment alone: a run that
        calls none neither needs a key nor imports litellm to find that out.
        """
        m = self.config.model
        for name in self.models_in_use():
            problem = missing_api_key(name, api_base=m.api_base, api_key_env=m.api_key_env)
            if problem:
                hint = ("export it (model.apiKeyEnv names it)" if m.api_key_env
                        else "export it, or name the variable that holds the key in model.apiKeyEnv")
                raise UserError(f"{problem.removesuffix('.')}: {hint}.")

    def resolve_model(self, name: str) -> str:
        """A scripted model's relative script path is relative to the project."""
        prefix = "scripted/"
        if name.startswith(prefix) and not Path(name[len(prefix) :]).is_absolute():
            return prefix + str(self.project_dir / name[len(prefix) :])
        return name

    def _prune_memory(self) -> None:
        c = self.config
        if self.memory_url and self._memory is None:
            return  # reflexion off: the shared memory is not this run's to tend
        store = self._memory.store if self._memory is not None else None
        try:
            moved = apply_retention(self.project_dir, c.reflexion.retention_days,
                                    live_per_agent=c.memory.live_per_agent, store=store)
        except MemoryFileError as exc:  # before any attempt: one sentence, exit 2
            raise UserError(str(exc)) from None
        if moved:
            self.notices.append(
                f"moved {moved} reflection(s) to .openagents/memory/archive/: older than "
                f"{c.reflexion.retention_days} days (reflexion.retentionDays), or beyond each agent's newest "
                f"{c.memory.live_per_agent} task reflections (memory.livePerAgent)"
            )

    def _take_lock(self) -> None:
        lock = AgentLock(self.project_dir)
        try:
            lock.acquire()
        except LockHeld as exc:
            raise UserError(str(exc), EXIT_REFUSED) from None
        self._lock = lock
        if lock.stale_holder:
            self.notices.append(
                f"took over a stale lock left by a run that died ({describe_holder(lock.stale_holder)})"
            )

    def close(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        if hasattr(self, "repo"):
            self.repo.close()
        if self._memory is not None:
            self._memory.close()
            self._memory = None

    def __enter__(self) -> ProjectSession:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- recovery -------------------------------------------------------------------

    def recover(self) -> list[str]:
        """Put back what a killed or interrupted run left: trees restored, tasks reopened."""
        recovered = []
        for task in self.board.with_status("in_progress"):
            self.restore_task(task)
            recovered.append(task.id)
        if recovered:
            self.notices.append(
                "recovered task(s) left in progress by an earlier run: " + ", ".join(recovered)
            )
        return recovered

    def restore_task(
        self, task: Task, repo: Repo | None = None, *, reason: str = "interrupted run",
        stop_reason: StopReason | None = None,
    ) -> None:
        """Undo what the unfinished subtask of `task` did (only that) and put the task back to open.

        `reason` and `stop_reason` say why, as the loop's own put-back says it (a budget stop).
        """
        repo = repo or self.repo
        path = Layout(self.project_dir).plan(task.id)
        plan = SubtaskPlan.load(path)
        journal = Journal.load(self.project_dir, task.id)
        stop_leftovers(self.project_dir, task.id)
        for subtask in plan.subtasks if plan else []:
            if subtask.status != "in_progress" or subtask.base_commit is None:
                continue
            mine = journal if journal is not None and journal.subtask_id == subtask.id else None
            self._undo_killed_attempt(task, subtask, mine, repo)
            if stop_reason is not None and subtask.status == "pending":
                subtask.convergence = stop_reason
            plan.save(path)
        if journal is not None:
            journal.end()
        self.board.reopen(task.id)
        why = {"convergence": stop_reason} if stop_reason is not None else {}
        self.runlog.event("task_reopened", taskId=task.id, reason=reason, **why)

    def _undo_killed_attempt(self, task: Task, subtask: Subtask, journal: Journal | None, repo: Repo) -> None:
        assert self.runlog is not None and subtask.base_commit is not None
        if journal is not None and journal.commit is not None and journal.finish_commit(repo):
            sha = str(journal.commit["new"])
            subtask.status, subtask.commit = "done", sha  # killed during its commit: finished
            self.runlog.event("commit_recovered", taskId=task.id, subtaskId=subtask.id, sha=sha)
            return
        subtask.status = "pending"
        if repo.head() != subtask.base_commit:
            # Someone committed since: the killed agent, or the user after the crash. Whose
            # a commit is cannot be told for sure, and history is never rewritten on a guess.
            return
        ours, theirs, unknown = self._killed_attempt(repo, subtask, journal)
        if unknown:
            raise UserError(
                f"cannot tell whether the killed run of {task.id} or you removed {', '.join(unknown)}; "
                "nothing was changed: restore or commit those paths yourself and run again", EXIT_REFUSED)
        keeper, kept = Keeper(repo, Layout(self.project_dir).recovered(self.runlog.run_id)), []
        restored = repo.restore(subtask.base_commit, set(subtask.dirty_before) | theirs,
                                lambda paths: kept.extend(keeper.keep(paths)))
        put_back = self._put_back_user_files(repo, journal, lambda paths: kept.extend(keeper.keep(paths))) \
            if journal else []
        if kept:  # timing never proves whose a change was: what the undo would have lost is kept
            self.runlog.event("files_kept", taskId=task.id, subtaskId=subtask.id,
                              **kept_event(keeper.folder, self.project_dir, kept))
        self.runlog.event("restored", taskId=task.id, subtaskId=subtask.id, paths=restored,
                          keptYours=sorted(theirs), userFilesPutBack=put_back)

    @staticmethod
    def _put_back_user_files(repo: Repo, journal: Journal, before: Callable[[list[str]], object]) -> list[str]:
        """The user's uncommitted files as they were, where the killed run overwrote them
        (`before` is given them first: what is there now may be a newer edit of theirs)."""
        put_back = []
        for rel in journal.user_copies:
            copy, target = journal.user_copy(rel), repo.root / rel
            current = target.read_bytes() if target.is_file() else None
            if copy is not None and current != copy and journal.written_by_run(repo.root, rel):
                put_back.append(rel)
        if put_back:
            before(put_back)
        for rel in put_back:
            target = repo.root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(journal.user_copy(rel) or b"")
        return put_back

    # -- select and run -------------------------------------------------------------

    def select(self, task_id: str | None) -> Task:
        if task_id is None:
            task = self.board.next_ready()
            if task is None:
                raise UserError("no ready task in .openagents/tasks.jsonl", EXIT_NO_TASK)
            return task
        task = _call(lambda: self.board.get(task_id), EXIT_USAGE)
        if task in self.board.ready():
            return task
        if task.status in ("closed", "blocked"):
            raise UserError(_how_to_reopen(task, archived=task_id not in self.board.statuses()), EXIT_NO_TASK)
        waiting = [d.id for d in task.deps if d.type in ("blocks", "parent-child") and not self.board.is_closed(d.id)]
        raise UserError(f"task {task_id} is waiting for {', '.join(waiting)} to be closed", EXIT_NO_TASK)

    def base_model(self, name: str) -> ChatModel:
        c = self.config
        return LiteLLMModel(self.resolve_model(name), timeout=c.timeouts.model_seconds, temperature=c.model_temperature,
                            api_base=c.model.api_base, api_key_env=c.model.api_key_env)

    def build_loop(
        self,
        task_meter: Meter,
        repo: Repo | None = None,
        limits: Sequence[Ledger] = (),
    ) -> GoldenLoop:
        """The loop for one task. `limits` are the run's ledgers (shared with other
        workers); the task's own (maxCostUsdPerTask, maxTokensPerTask) is added here. Each
        model call reserves its worst case in all of them; each attempt asks them first."""
        c, runlog = self.config, self.runlog
        assert runlog is not None
        meters = [task_meter, self.run_meter]
        task_limit = self._task_limit(task_meter)
        ledgers = [limit for limit in (task_limit, *limits) if limit is not None]

        def metered(name: str, purpose: str) -> MeteredModel:
            return MeteredModel(self.base_model(name), meters, runlog, purpose, limits=ledgers,
                                max_output=c.max_output_tokens)

        model = metered(c.default_model, "execute")
        planner = metered(c.default_model, "decompose")
        executor = self._executor(model)
        service = None
        if c.reflexion.enabled:
            reflector = metered(c.reflection_model, "reflect")
            service = ReflectionService(
                self._project_memory().store,
                reflector,
                use_llm=c.reflexion.use_llm,
                timeout_s=c.reflection_timeout_s,
                max_per_retry=c.reflexion.max_reflections_per_retry,
                template=self.templates.reflection,
            )
        parts = LoopParts(
            project_dir=self.project_dir,
            config=c,
            repo=repo or self.repo,
            board=self.board,
            runlog=runlog,
            executor=executor,
            planner=planner if c.decompose_min_chars > 0 else None,
            reflections=service,
            session_id=runlog.run_id,
            meter=task_meter,
            budget_check=combine(*(limit.before_attempt for limit in ledgers)),
            task_reflector=self._task_reflector(metered) if c.task_reflection_on else None,
            memory=self._project_memory() if c.reflexion.enabled else None,
            review=self._review_gate(metered, repo or self.repo) if c.review.enabled else None,
        )
        return GoldenLoop(parts)

    @functools.cached_property
    def templates(self) -> PromptTemplates:
        """The project's own prompt templates, checked when the config was loaded."""
        return prompt_templates(self.config, self.project_dir)

    def _review_gate(self, metered: Callable[[str, str], ChatModel], repo: Repo) -> ReviewGate:
        """The review of passing attempts (review.enabled): the review model, the project's criteria."""
        from orchestrator.checks.review import ReviewGate  # only a project that reviews

        c = self.config
        model = metered(c.review_model, "review") if c.review.use_llm else None
        return ReviewGate(c.review, repo.root, model=model, template=self.templates.review,
                          timeout_s=c.timeouts.model_seconds, command_timeout_s=c.timeouts.verify_seconds)

    def _project_memory(self) -> ProjectMemory:
        """The store, lessons across tasks and outcome reflections: one per session, shared
        by its tasks. A shared memory that cannot be reached is a UserError (exit 2)."""
        if self._memory is None:
            c, layout = self.config, Layout(self.project_dir)
            embedder = litellm_embedder(
                self.resolve_model(c.memory.embedding_model), timeout_s=c.timeouts.model_seconds,
                api_base=c.model.api_base, api_key_env=c.model.api_key_env,
            ) if c.memory.embedding_model else None
            try:
                self._memory = open_project_memory(c, self.project_dir, layout.reflections.parent,
                                                   store_url=self.memory_url, embedder=embedder)
            except PostgresUnavailable as exc:
                raise MemoryUnavailable(f"{exc} (memory.store)") from None
            except MemoryFileError as exc:
                raise UserError(str(exc)) from None
        return self._memory

    def _task_reflector(self, metered: Callable[[str, str], ChatModel]) -> TaskReflector:
        """Task reflection (memory.taskReflection): the reflection model, the project's file."""
        from reflection.task_strategy import (
            LlmReflectionStrategy,  # only a run that uses it
        )

        c = self.config
        strategy = LlmReflectionStrategy(metered(c.reflection_model, "task_reflect"),
                                         timeout_s=c.reflection_timeout_s,
                                         template=c.memory.task_reflection_prompt)
        store = JsonTaskReflectionStore(Layout(self.project_dir).task_reflections)
        return TaskReflector(store, strategy)

    def _executor(self, model: MeteredModel) -> Executor:
        # Each executor imported only when chosen: the builtin one loads the edit parsers.
        c = self.config
        if c.executor.kind == "command":
            from orchestrator.executors.command import CommandExecutor

            return CommandExecutor(c.executor.command or "", timeout_s=c.executor.timeout_seconds)
        if c.executor.kind != "builtin":  # a coding agent preset, metered and limited like the model
            from orchestrator.executors.agent import agent_executor

            return agent_executor(c.executor, model.meters, model.runlog, model.limits)
        from orchestrator.executors.builtin import BuiltinExecutor

        return BuiltinExecutor(
            model,
            max_context_bytes=c.executor.max_context_bytes,
            timeout_s=c.timeouts.model_seconds,
            formats=self._format_chooser(model.name),
        )

    def _format_chooser(self, model: str) -> FormatChooser:
        from orchestrator.executors.format_choice import (
            FormatChooser,
            FormatHistory,
            format_for_model,
        )

        e = self.config.executor
        setting = format_for_model(e.edit_format, e.edit_format_by_model, model)
        return FormatChooser(setting, model, FormatHistory.for_project(self.project_dir))

    def _task_limit(self, task_meter: Meter) -> SpendLimit | None:
        """maxCostUsdPerTask / maxTokensPerTask: the task's ledger."""
        c = self.config
        if c.max_cost_usd_per_task is None and c.max_tokens_per_task is None:
            return None
        if c.max_cost_usd_per_task is not None and self._prices_known is None:
            self._prices_known = all(price_known(m) for m in self.models_in_use())
        limit = SpendLimit(
            task_meter,
            c.max_cost_usd_per_task,
            c.max_tokens_per_task,
            scope="task",
            price_known=self._prices_known is not False,
        )
        return limit

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
        spending ledgers (see `build_loop`).
        """
        meter, started = Meter(), time.monotonic()
        if self.may_call_model(task):  # the import takes seconds: start it while the checks run
            preload_litellm()
        loop = self.build_loop(meter, repo, limits)
        try:
            outcome = await loop.run_task(task)
        except BaseException as exc:
            refused = budget_refusal(exc)
            if refused is None:
                self.restore_task(self.board.get(task.id), repo)
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
        self.restore_task(self.board.get(task.id), repo, reason=reason, stop_reason=StopReason.BUDGET)
        return TaskOutcome(task.id, "budget", reason, meter=meter, duration_s=time.monotonic() - started,
                           stop_reason=StopReason.BUDGET)

    def commit_bookkeeping(self, task_id: str) -> str | None:
        """Commit `.openagents/` state in a commit of its own, never with code, and only what
        goldenloop wrote (orchestrator/bookkeeping.py): never a change of yours."""
        if not self.config.commit_bookkeeping:
            return None
        dirty = [p for p in self.repo.dirty_paths_under(OPENAGENTS) if not p.endswith(".lock") and not _is_memory(p)]
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
        self.runlog.event("bookkeeping_committed", taskId=task_id, sha=sha, files=len(paths))
        return sha

    def _finish_killed_commits(self) -> None:
        """A run killed during a commit (code or bookkeeping) may have left it half done: the
        commit built, the index or HEAD not yet moved. Finished before the tree is judged
        dirty, so that the user's next `git commit` never reverts it."""
        marker = Layout(self.project_dir).bookkeeping_marker
        with contextlib.suppress(FileNotFoundError):
            pending = orjson.loads(marker.read_bytes())
            if self.repo.finish_commit(list(pending["paths"]), pending["old"], pending["new"]):
                self.notices.append("finished the bookkeeping commit of a run killed while making it")
            marker.unlink()
        for task in self._in_progress():
            journal = Journal.load(self.project_dir, task.id)
            if journal is not None:
                journal.finish_commit(self.repo)


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


RUNTIME_IGNORE = """# Written by goldenloop: runtime files that are not project state.
*.lock
runs/
progress.md
worktrees/
journal/
history/
recovered/
"""

# The reflections are a cache of lessons, append-only and unbounded: committing them with
# every task's bookkeeping made git hash the whole file per task (seconds at 1M records)
# and kept a full copy per version in history. They stay on disk, pruned by
# reflexion.retentionDays (docs/ARCHITECTURE.md, "Files").
MEMORY_IGNORE = "memory/reflections.jsonl*\nmemory/.pruned\n"
# Task reflections are rewritten whole by every accepted task: a cache like the above.
TASK_NOTES_IGNORE = "memory/task-reflections.json*\n"
# What is derived from the reflections (the lesson index, the markdown view), how often
# each lesson helped, and the archive: caches and history. memory/rules.md is versioned.
LESSONS_IGNORE = "memory/lessons.sqlite*\nmemory/lesson-uses.jsonl*\nmemory/reflections/\nmemory/archive/\n"
# What `goldenloop serve` stores for the reflect API: a log of requests, not project state.
REFLECT_API_IGNORE = "memory/reflect-history.jsonl*\n"


def ensure_runtime_ignored(project_dir: Path) -> None:
    """Keep locks, run logs, progress and the reflections out of git; tasks, plans and
    escalations stay versioned with the code they describe."""
    path = Layout(project_dir).gitignore
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(RUNTIME_IGNORE + MEMORY_IGNORE + TASK_NOTES_IGNORE + LESSONS_IGNORE + REFLECT_API_IGNORE)
        return
    text = path.read_text()
    # Projects from before memory left git, or before the journal (which holds copies of
    # the user's uncommitted files: never to be committed) existed.
    wanted = (("memory/reflections.jsonl", MEMORY_IGNORE), ("journal/", "journal/\n"), ("history/", "history/\n"),
              ("recovered/", "recovered/\n"),
              ("memory/task-reflections.json", TASK_NOTES_IGNORE), ("memory/lessons.sqlite", LESSONS_IGNORE),
              ("memory/reflect-history.jsonl", REFLECT_API_IGNORE))
    missing = "".join(entry for key, entry in wanted if key not in text)
    if missing:
        path.write_text(text + ("" if text.endswith("\n") or not text else "\n") + missing)


RETENTION_EVERY_S = 24 * 3600  # pruning reads the whole memory: at most once a day


def apply_retention(project_dir: Path, retention_days: int, now: float | None = None,
                    live_per_agent: int = 30, store: ReflectionStore | None = None) -> int | None:
    """Move to the store's archive the attempt reflections older than `retention_days` and
    the outcome reflections beyond each agent's newest `live_per_agent`, at most once a day
    on this machine (the mtime of `memory/.pruned` says when it last ran); how many moved,
    None when not due. `store`: the project's JSONL files unless given (a shared database)."""
    layout = Layout(project_dir)
    marker = layout.reflections.with_name(".pruned")
    now = time.time() if now is None else now
    own = store is None
    store = JsonlReflectionStore(layout.reflections) if store is None else store
    try:
        if store.empty():
            return None
        with contextlib.suppress(FileNotFoundError):
            if now - marker.stat().st_mtime < RETENTION_EVERY_S:
                return None
        from reflection.retention import (
            archive_outcomes,  # once a day: its models only then
        )

        moved = store.prune(datetime.fromtimestamp(now, UTC) - timedelta(days=retention_days))
        moved += archive_outcomes(store, keep_per_agent=live_per_agent)
    finally:
        if own:
            store.close()
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    os.utime(marker, (now, now))
    return moved


def _is_memory(path: str) -> bool:
    """The reflections (a project from before they left git may still track them)."""
    return (path.startswith((f"{OPENAGENTS}memory/reflections.jsonl", f"{OPENAGENTS}memory/task-reflections.json"))
            or path == f"{OPENAGENTS}memory/.pruned")


def _call(make, exit_code: int):
    """Run `make`, turning the errors a user can cause into a UserError."""
    try:
        return make()
    except (RepoError, TaskFileError, LockTimeout) as exc:
        raise UserError(str(exc), exit_code) from None


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
