"""The Reflection pattern: generate, reflect against criteria, revise, until good enough.

`ReflectionPattern.execute(agent, query)` asks the agent for a first output, scores it
(`reflect`), and while no rule stops it asks for a revision (`revise`) and scores that.
`max_iterations` counts the versions scored, the first included. Each version is fed to
the shared `ConvergenceTracker`: quality met, plateau, oscillation, diminishing returns,
semantic stability and the token budget stop it; a version worse than the best is
reverted, so the next revision starts from the best version. Callbacks see each
generation, reflection and revision, and `on_reflection` may override the decision.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from reflection.llm import ChatModel
from reflection.pattern.agent import Agent, AgentOutput, ModelAgent, as_agent
from reflection.pattern.convergence import (
    ConvergenceReason,
    ConvergenceSettings,
    ConvergenceTracker,
    Decision,
    Step,
    Wording,
)
from reflection.pattern.criteria import QualityCriterion, criteria_for
from reflection.pattern.evaluation import CriterionScore, ReflectionEvaluation, evaluation_of
from reflection.pattern.evaluators import criteria_problem, evaluate
from reflection.pattern.history import SELECTION_RULES, ReflectionHistory, ReflectionVersion, select_best
from reflection.pattern.judge import template_problem
from reflection.pattern.metrics import metrics_of
from reflection.pattern.revision import STRATEGIES, Earlier, Strategy, choose_strategy, revision_prompt
from reflection.pattern.run import PatternRun, current_run, enter_run, leave_run, tokens_of
from reflection.pattern.stability import Embed, similarity_for
from reflection.pattern.triggers import TriggerSettings, tool_issues
from reflection.schema import Usage
from reflection.text import one_line

WORDING = Wording(noun="iteration", satisfied="met the quality threshold", first="fell short of the quality threshold")


class ReflectionDecision(StrEnum):
    """A callback's word after a reflection: AUTO leaves the decision to the rules."""

    AUTO = "auto"
    CONTINUE = "continue"  # revise again even if a rule would stop (not past the limits)
    STOP = "stop"  # stop now: USER_STOPPED
    ACCEPT = "accept"  # this output is good: USER_ACCEPTED, a success


class ReflectionCallbacks:
    """Hooks into a run; subclass and override what you need."""

    async def on_generation(self, output: str, iteration: int) -> None:
        """After each output is produced (the first and every revision)."""

    async def on_reflection(self, evaluation: ReflectionEvaluation, iteration: int) -> ReflectionDecision:
        """After each reflection; may override whether the run goes on."""
        return ReflectionDecision.AUTO

    async def on_revision(self, old_output: str, new_output: str, iteration: int) -> None:
        """After each revision; `iteration` is the new version's."""


class AgentError(RuntimeError):
    """The agent failed and the `error` trigger is off."""


@dataclass(frozen=True)
class ReflectionResult:
    """What a run produced: use `best_output`; `final_output` is the last version."""

    success: bool
    final_output: str
    best_output: str
    final_evaluation: ReflectionEvaluation
    history: ReflectionHistory
    iterations_used: int
    convergence_reason: ConvergenceReason
    token_usage: Usage
    execution_time: float


class ReflectionPattern:
    """Iterative self-improvement of one output; see the module's doc and docs/PATTERN.md."""

    def __init__(
        self,
        max_iterations: int = 3,
        quality_criteria: Sequence[QualityCriterion] | None = None,
        quality_threshold: float = 0.8,
        reflection_prompt: str | None = None,
        revision_strategy: str = "hybrid",
        reflection_triggers: Sequence[str] = ("completion",),
        best_version_selection: str = "highest_score",
        structured_reflection: bool = True,
        reflection_model: ChatModel | str | None = None,
        task_type: str = "code_generation",
        preserve_all_versions: bool = True,
        include_prior_versions: bool = False,
        include_reflection_history: bool = True,
        max_revision_tokens: int | None = None,
        convergence: ConvergenceSettings | None = None,
        callbacks: ReflectionCallbacks | None = None,
        reflection_interval: int | None = None,
        reflect_on_error: bool = False,
        reflect_on_tools: Sequence[str] = (),
        quality_drop_threshold: float | None = None,
        judge_timeout_s: float = 60.0,
        embedding_model: str | Embed | None = None,
        judge_repeats: int = 1,
    ) -> None:
        if problem := _settings_problem(max_iterations, quality_threshold, revision_strategy, best_version_selection,
                                        reflection_prompt, judge_repeats):
            raise ValueError(problem)
        self.max_iterations = max_iterations
        self.criteria = tuple(quality_criteria) if quality_criteria else criteria_for(task_type)
        self.quality_threshold = quality_threshold
        self.reflection_prompt = reflection_prompt
        self.revision_strategy = revision_strategy
        self.best_version_selection = best_version_selection
        self.structured_reflection = structured_reflection
        self.model = _model(reflection_model)
        if problem := criteria_problem(self.criteria, self.model):
            raise ValueError(problem)
        self.preserve_all_versions = preserve_all_versions
        self.include_prior_versions = include_prior_versions
        self.include_reflection_history = include_reflection_history
        self.max_revision_tokens = max_revision_tokens
        self.convergence = convergence or ConvergenceSettings()
        self.callbacks = callbacks or ReflectionCallbacks()
        self.triggers = TriggerSettings.build(
            list(reflection_triggers), reflection_interval=reflection_interval, reflect_on_error=reflect_on_error,
            reflect_on_tools=reflect_on_tools, quality_drop_threshold=quality_drop_threshold)
        self.judge_timeout_s = judge_timeout_s
        self.judge_repeats = judge_repeats  # the model judge asked n times: its consistency measured
        self.similarity = similarity_for(embedding_model)
        self._last = self._new_run(None, "")  # what get_history shows outside a run

    # --- state ----------------------------------------------------------------------------------

    def _new_run(self, agent: Agent | None, query: str) -> PatternRun:
        return PatternRun(agent, query, ConvergenceTracker(self.convergence, WORDING))

    @property
    def _run(self) -> PatternRun:
        """The run in progress in this context (each execute has its own), else the last one."""
        return current_run(self) or self._last

    def request_reflection(self) -> None:
        """The `manual` trigger: the next decision to stop is overridden by one more round
        (of the run this is called from, as in a callback; else of the last run begun)."""
        self._run.requested = True

    def get_history(self) -> ReflectionHistory:
        kept = self._run.versions if self.preserve_all_versions else self._kept()
        best = select_best(self._run.versions, self.best_version_selection)
        return ReflectionHistory(
            versions=list(kept),
            best_version=best,
            final_version=self._run.versions[-1] if self._run.versions else None,
            convergence_reason=self._run.reason.value if self._run.reason else None,
            total_iterations=len(self._run.versions),
            metrics=metrics_of([v.evaluation for v in self._run.versions], best.evaluation if best else None),
        )

    def get_best_version(self) -> ReflectionVersion:
        best = select_best(self._run.versions, self.best_version_selection)
        if best is None:
            raise LookupError("no version yet: call execute first")
        return best

    def _kept(self) -> list[ReflectionVersion]:
        """Without preserve_all_versions: the best and the final version only."""
        keep = {id(self.get_best_version()), id(self._run.versions[-1])} if self._run.versions else set()
        return [v for v in self._run.versions if id(v) in keep]

    # --- the loop -------------------------------------------------------------------------------

    async def execute(self, agent: object, query: str) -> ReflectionResult:
        """Generate, reflect and revise until a rule, a callback or a limit stops it.
        Concurrent calls on one pattern are independent runs."""
        run = self._last = self._new_run(as_agent(agent), query)
        token = enter_run(self, run)
        try:
            return await self._execute(run)
        finally:
            leave_run(token)

    async def _execute(self, run: PatternRun) -> ReflectionResult:
        started = time.perf_counter()
        query = run.query
        output = await self._run_agent(query, max_tokens=None)
        improvements: list[str] = []
        extra: dict[str, object] = {}
        iteration = 1
        while True:
            await self.callbacks.on_generation(output.text, iteration)
            version = await self._reflect_version(iteration, output, improvements, extra)
            decision = run.tracker.record(await self._step(version))
            stop, base = await self._resolve(decision, version)
            if stop is None and iteration >= self.max_iterations:
                stop = ConvergenceReason.MAX_ITERATIONS
            if stop is not None:
                run.reason = stop
                break
            strategy = self._strategy(base, decision)
            improvements = [*base.evaluation.issues, *base.evaluation.suggestions]
            output = await self._run_agent(self._prompt(base, strategy), max_tokens=self.max_revision_tokens)
            extra = {"strategy": strategy, "revisedFrom": base.iteration}
            iteration += 1
            await self.callbacks.on_revision(base.output, output.text, iteration)
        return self._result(started)

    async def _run_agent(self, prompt: str, *, max_tokens: int | None) -> AgentOutput:
        """The agent's output; an error becomes an output with `error` set, or AgentError."""
        assert self._run.agent is not None
        try:
            output = await self._run.agent.run(prompt, max_tokens=max_tokens)
        except Exception as exc:  # noqa: BLE001 - the error trigger reflects on any failure
            if not self.triggers.reflect_on_error:
                raise AgentError(f"the agent failed: {exc}") from exc
            output = AgentOutput(self._run.versions[-1].output if self._run.versions else "", error=f"{type(exc).__name__}: {exc}")
        if output.error and not self.triggers.reflect_on_error:
            raise AgentError(f"the agent reported an error: {output.error}")
        self._spend(output.usage)
        return output

    def _spend(self, usage: Usage | None) -> None:
        self._run.spend(usage)

    async def _reflect_version(
        self, iteration: int, output: AgentOutput, improvements: list[str], extra: dict[str, object]
    ) -> ReflectionVersion:
        """Score an output with every trigger that fires on it, as a version."""
        fired = ["completion"]
        if output.error:
            evaluation = self._error_evaluation(output.error)
            fired.append("error")
        else:
            evaluation = await self.reflect(output.text)
            evaluation, more = await self._triggered(output, evaluation)
            fired += more
        if self._run.versions and (dropped := self.triggers.dropped(self._run.versions[-1].evaluation, evaluation)):
            evaluation = dataclasses.replace(evaluation, issues=[*dropped, *evaluation.issues])
            fired.append("quality_drop")
        watched = self.triggers.watched(output)
        version = ReflectionVersion(
            iteration=iteration, output=output.text, evaluation=evaluation, improvements_applied=improvements,
            token_usage=self._run.step_usage,
            extra={**extra, "triggers": fired,
                   "toolResults": [{"tool": r.tool, "ok": r.ok, "output": one_line(r.output, 500)} for r in watched]},
        )
        self._run.step_usage = Usage()
        self._run.versions.append(version)
        return version

    async def _triggered(
        self, output: AgentOutput, evaluation: ReflectionEvaluation
    ) -> tuple[ReflectionEvaluation, list[str]]:
        """The evaluation with what step_interval, error (in steps) and tool_result found."""
        fired: list[str] = []
        issues: list[str] = []
        for index, step in self.triggers.checkpoints(output):
            found = await self.reflect(step.text)
            issues += [f"after step {index}: {i}" for i in found.issues]
            fired.append("step_interval")
        if errors := self.triggers.step_errors(output):
            issues += errors
            fired.append("error")
        watched = self.triggers.watched(output)
        failed = tool_issues(watched)
        if watched:
            issues += failed
            fired.append("tool_result")
        if not issues:
            return evaluation, fired
        satisfactory = evaluation.satisfactory and not failed and not errors
        return dataclasses.replace(evaluation, issues=[*evaluation.issues, *issues], satisfactory=satisfactory), fired

    def _error_evaluation(self, error: str) -> ReflectionEvaluation:
        scores = [CriterionScore(c.name, 0.0, "the run failed", c.evaluator) for c in self.criteria]
        return evaluation_of(scores, self.criteria, self.quality_threshold,
                             issues=[f"the run failed: {one_line(error, 300)}"], confidence=1.0)

    async def _step(self, version: ReflectionVersion) -> Step:
        thresholds = {c.name: c.threshold for c in self.criteria}
        e = version.evaluation
        failing = frozenset(n for n, s in e.criteria_scores.items() if s < thresholds.get(n, 0.0))
        return Step(version.iteration, e.overall_score, failing, satisfied=e.satisfactory,
                    output=version.output, tokens=tokens_of(version.token_usage),
                    similarity=await self._similar_to_previous(version))

    async def _similar_to_previous(self, version: ReflectionVersion) -> float | None:
        """How alike this version is to the one before (the stability rule); None: not asked."""
        versions = self._run.versions
        if self.convergence.stability_threshold is None or len(versions) < 2 or version is not versions[-1]:
            return None
        return await self.similarity(versions[-2].output, version.output)

    async def _resolve(
        self, decision: Decision, version: ReflectionVersion
    ) -> tuple[ConvergenceReason | None, ReflectionVersion]:
        """Why to stop (None: go on) and the version the next revision starts from."""
        said = await self.callbacks.on_reflection(version.evaluation, version.iteration)
        if said is ReflectionDecision.ACCEPT:
            return ConvergenceReason.USER_ACCEPTED, version
        if said is ReflectionDecision.STOP:
            return ConvergenceReason.USER_STOPPED, version
        stop = decision.reason if decision.action == "stop" else None
        if stop is not None and stop is not ConvergenceReason.TOKEN_BUDGET:
            if said is ReflectionDecision.CONTINUE:
                stop = None
            elif self._run.requested:
                self._run.requested, stop = False, None
        return stop, self._base(decision, version)

    def _base(self, decision: Decision, version: ReflectionVersion) -> ReflectionVersion:
        """The best version after a regression (reverted), else the latest."""
        dropped = "quality_drop" in version.extra.get("triggers", [])
        if decision.rollback_to is None or not (self.convergence.rollback_regressions or dropped):
            return version
        return next(v for v in self._run.versions if v.iteration == decision.rollback_to)

    def _strategy(self, base: ReflectionVersion, decision: Decision) -> Strategy:
        return choose_strategy(self.revision_strategy, base.evaluation, self.criteria,
                               after_regression=decision.rollback_to is not None)

    def _prompt(self, base: ReflectionVersion, strategy: Strategy) -> str:
        earlier = [Earlier(v.iteration, v.output, v.evaluation) for v in self._run.versions if v is not base]
        tools = [f"{r['tool']} ({'ok' if r['ok'] else 'failed'}): {r['output']}"
                 for r in base.extra.get("toolResults", [])]
        return revision_prompt(strategy, self._run.query, base.output, base.evaluation, iteration=base.iteration,
                               structured=self.structured_reflection, earlier=earlier,
                               show_reviews=self.include_reflection_history,
                               show_outputs=self.include_prior_versions, tool_results=tools)

    def _result(self, started: float) -> ReflectionResult:
        history = self.get_history()
        final = self._run.versions[-1]
        best = history.best_version or final
        reason = self._run.reason or ConvergenceReason.MAX_ITERATIONS
        success = reason is ConvergenceReason.USER_ACCEPTED or best.evaluation.satisfactory
        return ReflectionResult(
            success=success, final_output=final.output, best_output=best.output,
            final_evaluation=final.evaluation, history=history, iterations_used=len(self._run.versions),
            convergence_reason=reason, token_usage=self._run.usage, execution_time=time.perf_counter() - started,
        )

    # --- the public steps -----------------------------------------------------------------------

    async def reflect(self, output: str, criteria: Sequence[QualityCriterion] | None = None) -> ReflectionEvaluation:
        """Score `output` on the criteria (the pattern's by default)."""
        chosen = tuple(criteria) if criteria else self.criteria
        evaluated = await evaluate(output, chosen, self.quality_threshold, model=self.model, task=self._run.query,
                                   template=self.reflection_prompt, judge_timeout_s=self.judge_timeout_s,
                                   judgements=self.judge_repeats)
        self._spend(evaluated.usage)
        return evaluated.evaluation

    async def revise(self, output: str, evaluation: ReflectionEvaluation) -> str:
        """One revision of `output` by the agent of the last `execute` (else the reflection model)."""
        if self._run.agent is None:
            if self.model is None:
                raise ValueError("revise needs an agent: call execute first, or give a reflection_model")
            self._run.agent = ModelAgent(self.model)
        strategy = choose_strategy(self.revision_strategy, evaluation, self.criteria, after_regression=False)
        base = ReflectionVersion(iteration=len(self._run.versions) + 1, output=output, evaluation=evaluation)
        revised = await self._run_agent(self._prompt(base, strategy), max_tokens=self.max_revision_tokens)
        return revised.text


def _settings_problem(max_iterations: int, quality_threshold: float, revision_strategy: str,
                      best_version_selection: str, reflection_prompt: str | None, judge_repeats: int) -> str | None:
    """What is wrong with a pattern's settings, as a sentence; None if nothing."""
    if max_iterations < 1:
        return "max_iterations must be at least 1"
    if not 0.0 <= quality_threshold <= 1.0:
        return "quality_threshold must be within 0..1"
    if revision_strategy not in STRATEGIES:
        return f"unknown revision strategy {revision_strategy!r}; known: {', '.join(STRATEGIES)}"
    if best_version_selection not in SELECTION_RULES:
        return f"unknown best_version_selection {best_version_selection!r}; known: {', '.join(SELECTION_RULES)}"
    if reflection_prompt is not None and (problem := template_problem(reflection_prompt)):
        return f"reflection_prompt {problem}"
    if judge_repeats < 1:
        return "judge_repeats must be at least 1"
    return None


def _model(model: ChatModel | str | None) -> ChatModel | None:
    if isinstance(model, str):
        from reflection.llm import LiteLLMModel, missing_api_key  # a name: litellm itself stays lazy

        problem = missing_api_key(model)  # else every judge call fails, and every version scores 0
        if problem:
            raise ValueError(problem)
        return LiteLLMModel(model)
    return model
