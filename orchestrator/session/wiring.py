"""Wiring: the loop's parts built from the config, for each task a run starts.

`Wiring.build_loop` reads top to bottom: the spending ledgers (the task's own and the
run's), the metered models, the executor, the reflection service, then `LoopParts` with
the parts a project turns on (task reflection, memory across tasks, the review gate).
Which models a run can call (`models_in_use`) is said here too: the API keys checked at
open and the prices a cost budget needs are those.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.budget import Ledger, SpendLimit, combine
from orchestrator.config import ProjectConfig, PromptTemplates, prompt_templates
from orchestrator.executors.base import Executor
from orchestrator.git.provided import Provided
from orchestrator.git.repo import Repo
from orchestrator.judging.export import JudgeTrees
from orchestrator.layout import Layout
from orchestrator.loop.decompose import is_small
from orchestrator.loop.golden import GoldenLoop
from orchestrator.loop.parts import LoopParts
from orchestrator.loop.project_memory import ProjectMemory, open_project_memory, project_key
from orchestrator.metering import MeteredModel
from orchestrator.runlog import RunLog
from orchestrator.session.errors import MemoryUnavailable, UserError
from orchestrator.tasks import Task, TaskBoard
from reflection.backends import open_task_store
from reflection.embeddings import litellm_embedder
from reflection.fileio import MemoryFileError
from reflection.llm import ChatModel, LiteLLMModel, price_known
from reflection.meter import Meter
from reflection.postgres.connection import PostgresUnavailable
from reflection.service import ReflectionService
from reflection.task_reflector import TaskReflector
from reflection.task_store import TaskReflectionStore

if TYPE_CHECKING:
    from orchestrator.checks.review import ReviewGate
    from orchestrator.executors.format_choice import FormatChooser


@dataclass
class Wiring:
    project_dir: Path
    config: ProjectConfig
    repo: Repo
    board: TaskBoard
    runlog: RunLog
    run_meter: Meter  # the run's, shared by its tasks
    memory_url: str | None  # memory.store's PostgreSQL URL; None: the JSONL files
    _memory: ProjectMemory | None = None
    _notes: TaskReflectionStore | None = None  # task notes' store, once made
    _prices_known: bool | None = None
    _judges: JudgeTrees | None = None  # the run's judge's trees, made on first use
    # Parallel workers may build their loops at once, each on its own thread: the memory
    # and the notes' store are made once, not once per worker.
    _building: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    # -- the loop of one task ---------------------------------------------------------

    def build_loop(self, task_meter: Meter, repo: Repo | None = None, limits: Sequence[Ledger] = ()) -> GoldenLoop:
        """The loop for one task. `limits` are the run's ledgers (shared with other
        workers); the task's own (maxCostUsdPerTask, maxTokensPerTask) is added here. Each
        model call reserves its worst case in all of them; each attempt asks them first."""
        with self._building:
            return self._build_loop(task_meter, repo, limits)

    def _build_loop(self, task_meter: Meter, repo: Repo | None, limits: Sequence[Ledger]) -> GoldenLoop:
        c, runlog = self.config, self.runlog
        ledgers = [limit for limit in (self._task_limit(task_meter), *limits) if limit is not None]
        metered = functools.partial(self._metered, meters=[task_meter, self.run_meter], ledgers=ledgers)
        parts = LoopParts(
            project_dir=self.project_dir,
            config=c,
            repo=repo or self.repo,
            board=self.board,
            runlog=runlog,
            executor=self._executor(metered(c.default_model, "execute")),
            planner=metered(c.own_model, "decompose") if c.decompose_min_chars > 0 and c.own_model else None,
            reflections=self._reflection_service(metered) if c.reflexion.enabled else None,
            session_id=runlog.run_id,
            meter=task_meter,
            budget_check=combine(*(limit.before_attempt for limit in ledgers)),
            task_reflector=functools.cache(lambda: self.task_reflector(metered(c.reflection_model, "task_reflect")))
            if c.reflections_by_model and c.reflection_model else None,
            memory=self.project_memory() if c.reflexion.enabled else None,
            review=self._review_gate(metered, repo or self.repo) if c.review.enabled else None,
            judges=self.judges,
        )
        return GoldenLoop(parts)

    @property
    def judges(self) -> JudgeTrees:
        """The run's judge's trees (orchestrator/judging/export.py), shared by its workers."""
        if self._judges is None:
            w = self.config.worktree
            self._judges = JudgeTrees(self.repo, Provided.of(self.project_dir, w.link, w.copy_))
        return self._judges

    def _metered(self, name: str, purpose: str, *, meters: list[Meter], ledgers: list[Ledger]) -> MeteredModel:
        return MeteredModel(self.base_model(name), meters, self.runlog, purpose, limits=ledgers,
                            max_output=self.config.max_output_tokens)

    def base_model(self, name: str) -> ChatModel:
        c = self.config
        return LiteLLMModel(self.resolve_model(name), timeout=c.timeouts.model_seconds, temperature=c.model_temperature,
                            api_base=c.model.api_base, api_key_env=c.model.api_key_env)

    def _task_limit(self, task_meter: Meter) -> SpendLimit | None:
        """maxCostUsdPerTask / maxTokensPerTask: the task's ledger."""
        c = self.config
        if c.max_cost_usd_per_task is None and c.max_tokens_per_task is None:
            return None
        if c.max_cost_usd_per_task is not None and self._prices_known is None:
            self._prices_known = all(price_known(m) for m in self.models_in_use())
        return SpendLimit(task_meter, c.max_cost_usd_per_task, c.max_tokens_per_task, scope="task",
                          price_known=self._prices_known is not False)

    def _executor(self, model: MeteredModel) -> Executor:
        # Each executor imported only when chosen: the builtin one loads the edit parsers.
        c = self.config
        if c.executor.kind == "command":
            from orchestrator.executors.command import CommandExecutor
            from orchestrator.executors.confinement import confinement

            return CommandExecutor(c.executor.command or "", timeout_s=c.executor.timeout_seconds,
                                   confined=confinement((), c.executor.writable, sandbox=c.executor.sandbox,
                                                          keep_out=[self.project_dir]))
        if c.executor.kind != "builtin":  # a coding agent preset, metered and limited like the model
            from orchestrator.executors.agent import agent_executor

            return agent_executor(c.executor, model.meters, model.runlog, model.limits, keep_out=[self.project_dir])
        from orchestrator.executors.builtin import BuiltinExecutor

        return BuiltinExecutor(model, max_context_bytes=c.executor.max_context_bytes,
                               timeout_s=c.timeouts.model_seconds, formats=self._format_chooser(model.name))

    def _format_chooser(self, model: str) -> FormatChooser:
        from orchestrator.executors.format_choice import FormatChooser, FormatHistory, format_for_model

        e = self.config.executor
        setting = format_for_model(e.edit_format, e.edit_format_by_model, model)
        return FormatChooser(setting, model, FormatHistory.for_project(self.project_dir))

    def _reflection_service(self, metered: Callable[[str, str], ChatModel]) -> ReflectionService:
        c = self.config
        model = metered(c.reflection_model, "reflect") if c.reflection_model else None
        return ReflectionService(self.project_memory().store, model,
                                 use_llm=c.reflections_by_model, timeout_s=c.reflection_timeout_s,
                                 max_per_retry=c.reflexion.max_reflections_per_retry,
                                 template=self.templates.reflection)

    def task_reflector(self, model: ChatModel | None = None) -> TaskReflector:
        """Task reflection (memory.taskReflection): the store and the strategy project.json
        names (memory.taskReflectionStore, memory.taskReflectionStrategy). The store is one
        per session; a store or strategy that cannot be made is a UserError (exit 2)."""
        from reflection.task_choice import TaskChoiceError, open_task_strategy

        c = self.config
        try:
            if self._notes is None:
                key = project_key(c, self.project_dir) if self.memory_url else ""
                self._notes = open_task_store(c.memory.task_reflection_store, self.memory_url,
                                              Layout(self.project_dir).reflections.parent, project=key)
        except TaskChoiceError as exc:
            raise UserError(f"{exc} (memory.taskReflectionStore)") from None
        except PostgresUnavailable as exc:
            raise MemoryUnavailable(f"{exc} (memory.store)") from None
        try:
            strategy = open_task_strategy(c.memory.task_reflection_strategy,
                                          model or self.base_model(c.reflection_model or c.default_model),
                                          timeout_s=c.reflection_timeout_s, template=c.memory.task_reflection_prompt)
        except TaskChoiceError as exc:
            raise UserError(f"{exc} (memory.taskReflectionStrategy)") from None
        return TaskReflector(self._notes, strategy)

    def check_task_choice(self) -> None:
        """memory.taskReflection on but no model to reflect: the names project.json gives
        are checked all the same, so a wrong one stops the run (exit 2) whatever useLLM says."""
        from reflection.task_choice import TaskChoiceError, check_named

        m = self.config.memory
        for key, spec in (("memory.taskReflectionStore", m.task_reflection_store),
                          ("memory.taskReflectionStrategy", m.task_reflection_strategy)):
            try:
                check_named(spec)
            except TaskChoiceError as exc:
                raise UserError(f"{exc} ({key})") from None

    def _review_gate(self, metered: Callable[[str, str], ChatModel], repo: Repo) -> ReviewGate:
        """The review of passing attempts (review.enabled): the review model, the project's criteria."""
        from orchestrator.checks.review import ReviewGate  # only a project that reviews

        c = self.config
        model = metered(c.review_model, "review") if c.review.use_llm and c.review_model else None
        return ReviewGate(c.review, repo.root, model=model, template=self.templates.review,
                          timeout_s=c.timeouts.model_seconds, command_timeout_s=c.timeouts.verify_seconds)

    @functools.cached_property
    def templates(self) -> PromptTemplates:
        """The project's own prompt templates, checked when the config was loaded."""
        return prompt_templates(self.config, self.project_dir)

    # -- the memory, one per run ------------------------------------------------------

    def project_memory(self) -> ProjectMemory:
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

    @property
    def opened_memory(self) -> ProjectMemory | None:
        """The memory if this run opened it (reflexion on), without opening it."""
        return self._memory

    def close(self) -> None:
        if self._judges is not None:
            self._judges.close()
            self._judges = None
        if self._memory is not None:
            self._memory.close()
        close = getattr(self._notes, "close", None)  # a database's connection; files hold nothing open
        if close is not None:
            close()
            self._memory = None

    # -- which models a run calls -----------------------------------------------------

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
        if c.executor.kind == "builtin":
            names.append(self.resolve_model(c.default_model))
        if c.own_model and any(self._plans(task) for task in tasks):
            names.append(self.resolve_model(c.own_model))
        if c.reflections_by_model and c.reflection_model:
            names.append(self.resolve_model(c.reflection_model))
        if c.review.enabled and c.review.use_llm and c.review_model:
            names.append(self.resolve_model(c.review_model))
        return list(dict.fromkeys(names))

    def _plans(self, task: Task) -> bool:
        """Whether `task` is decomposed by a model call (decomposeMinChars 0: never)."""
        min_chars = self.config.decompose_min_chars
        return min_chars > 0 and not is_small(task, min_chars)

    def may_call_model(self, task: Task) -> bool:
        """Whether running `task` can make a model call (see `models_in_use`)."""
        return bool(self.models_in_use([task]))

    def calls_model_first(self, task: Task) -> bool:
        """Whether `task`'s run calls a model before any verdict: the builtin executor, a model's
        plan, or a model's review of a first pass. A model's reflection waits for a failed verdict,
        which starts litellm's import then (loop/steps.py), so a run that passes at once never
        imports it."""
        c = self.config
        return (c.executor.kind == "builtin" or bool(c.own_model and self._plans(task))
                or bool(c.review.enabled and c.review.use_llm and c.review_model))

    def resolve_model(self, name: str) -> str:
        """A scripted model's relative script path is relative to the project."""
        prefix = "scripted/"
        if name.startswith(prefix) and not Path(name[len(prefix) :]).is_absolute():
            return prefix + str(self.project_dir / name[len(prefix) :])
        return name
