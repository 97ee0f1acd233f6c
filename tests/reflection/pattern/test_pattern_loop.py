"""ReflectionPattern.execute: the loop's stops, callbacks, budget, roll-back and strategies,
with a deterministic agent whose outputs carry their own scores (pattern_kit)."""

from __future__ import annotations

import pytest
from pattern_kit import QUALITY, Outputs, scores

from reflection.pattern import (
    AgentOutput,
    ConvergenceReason,
    ConvergenceSettings,
    QualityCriterion,
    ReflectionCallbacks,
    ReflectionDecision,
    ReflectionEvaluation,
    ReflectionPattern,
)
from reflection.pattern.revision import INSTRUCTIONS, choose_strategy
from reflection.schema import Usage


def _pattern(**kw: object) -> ReflectionPattern:
    kw.setdefault("quality_criteria", [QUALITY])
    kw.setdefault("max_iterations", 6)
    return ReflectionPattern(**kw)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_good_first_output_is_returned_at_once() -> None:
    agent = Outputs(["score=0.9 done"])
    result = await _pattern().execute(agent, "write it")
    assert (result.success, result.convergence_reason, result.iterations_used) == (True, ConvergenceReason.QUALITY_MET, 1)
    assert result.final_output == result.best_output == "score=0.9 done"
    assert agent.prompts == ["write it"]
    assert result.execution_time >= 0.0


@pytest.mark.anyio
async def test_the_journey_improves_until_the_threshold() -> None:
    agent = Outputs(["score=0.3 a", "score=0.6 b", "score=0.85 c"])
    result = await _pattern().execute(agent, "write it")
    assert scores(result) == [0.3, 0.6, 0.85]
    assert result.convergence_reason is ConvergenceReason.QUALITY_MET
    second = result.history.versions[1]
    assert second.improvements_applied == ["the weighted score 0.30 is below the quality threshold 0.80"]
    assert second.extra["revisedFrom"] == 1 and second.extra["triggers"] == ["completion"]
    assert "score=0.3 a" in agent.prompts[1] and "## The task\nwrite it" in agent.prompts[1]


@pytest.mark.anyio
async def test_the_iteration_limit_returns_the_best_version() -> None:
    agent = Outputs(["score=0.3 a", "score=0.5 b", "score=0.7 c"])
    result = await _pattern(max_iterations=3).execute(agent, "q")
    assert (result.convergence_reason, result.iterations_used, result.success) == (
        ConvergenceReason.MAX_ITERATIONS, 3, False)
    assert result.best_output == "score=0.7 c"


@pytest.mark.anyio
async def test_no_improvement_for_two_iterations_is_a_plateau() -> None:
    result = await _pattern().execute(Outputs(["score=0.5 a", "score=0.5 b", "score=0.5 c", "score=0.9"]), "q")
    assert result.convergence_reason is ConvergenceReason.PLATEAU and result.iterations_used == 3


@pytest.mark.anyio
async def test_scores_going_up_and_down_are_an_oscillation() -> None:
    agent = Outputs(["score=0.5 a", "score=0.7 b", "score=0.6 c", "score=0.7 d", "score=0.9"])
    result = await _pattern().execute(agent, "q")
    assert result.convergence_reason is ConvergenceReason.OSCILLATION and scores(result) == [0.5, 0.7, 0.6, 0.7]


@pytest.mark.anyio
async def test_small_gains_stop_with_diminishing_returns() -> None:
    settings = ConvergenceSettings(improvement_threshold=0.05)
    result = await _pattern(convergence=settings).execute(Outputs(["score=0.5", "score=0.6", "score=0.62"]), "q")
    assert result.convergence_reason is ConvergenceReason.DIMINISHING_RETURNS
    assert result.best_output == "score=0.62"


@pytest.mark.anyio
async def test_an_output_that_stops_changing_is_semantically_stable() -> None:
    settings = ConvergenceSettings(stability_threshold=0.9)
    agent = Outputs(["score=0.5 the first draft", "score=0.5 the first  draft", "score=0.9"])
    result = await _pattern(convergence=settings).execute(agent, "q")
    assert result.convergence_reason is ConvergenceReason.SEMANTIC_STABILITY and result.iterations_used == 2


@pytest.mark.anyio
async def test_the_token_budget_stops_the_run() -> None:
    def spent(text: str) -> AgentOutput:
        return AgentOutput(text, usage=Usage(input_tokens=40, output_tokens=10))

    settings = ConvergenceSettings(token_budget=120)
    result = await _pattern(convergence=settings).execute(Outputs([spent("score=0.2"), spent("score=0.4"),
                                                                   spent("score=0.6"), spent("score=0.8")]), "q")
    assert result.convergence_reason is ConvergenceReason.TOKEN_BUDGET and result.iterations_used == 3
    assert result.token_usage == Usage(input_tokens=120, output_tokens=30)
    assert result.history.versions[0].token_usage == Usage(input_tokens=40, output_tokens=10)


@pytest.mark.anyio
async def test_a_worse_revision_is_reverted_and_the_next_starts_from_the_best() -> None:
    agent = Outputs(["score=0.4 first", "score=0.7 BEST", "score=0.5 worse", "score=0.9 fixed"])
    result = await _pattern().execute(agent, "q")
    assert scores(result) == [0.4, 0.7, 0.5, 0.9]
    assert "score=0.7 BEST" in agent.prompts[3].split("## The review")[0]
    assert "score=0.5 worse" not in agent.prompts[3].split("## The review")[0]
    assert result.history.versions[3].extra["revisedFrom"] == 2


# --- callbacks -----------------------------------------------------------------------------------


class Scripted(ReflectionCallbacks):
    def __init__(self, *decisions: ReflectionDecision) -> None:
        self.decisions = list(decisions)
        self.seen: list[tuple[str, object, int]] = []

    async def on_generation(self, output: str, iteration: int) -> None:
        self.seen.append(("generation", output, iteration))

    async def on_reflection(self, evaluation: ReflectionEvaluation, iteration: int) -> ReflectionDecision:
        self.seen.append(("reflection", round(evaluation.overall_score, 2), iteration))
        return self.decisions.pop(0) if self.decisions else ReflectionDecision.AUTO

    async def on_revision(self, old_output: str, new_output: str, iteration: int) -> None:
        self.seen.append(("revision", (old_output, new_output), iteration))


@pytest.mark.anyio
async def test_callbacks_see_every_generation_reflection_and_revision() -> None:
    callbacks = Scripted()
    await _pattern(callbacks=callbacks).execute(Outputs(["score=0.5 a", "score=0.9 b"]), "q")
    assert callbacks.seen == [("generation", "score=0.5 a", 1), ("reflection", 0.5, 1),
                              ("revision", ("score=0.5 a", "score=0.9 b"), 2),
                              ("generation", "score=0.9 b", 2), ("reflection", 0.9, 2)]


@pytest.mark.anyio
async def test_a_callback_can_accept_a_version_the_rules_would_revise() -> None:
    result = await _pattern(callbacks=Scripted(ReflectionDecision.ACCEPT)).execute(Outputs(["score=0.3", "x"]), "q")
    assert (result.convergence_reason, result.success, result.iterations_used) == (
        ConvergenceReason.USER_ACCEPTED, True, 1)


@pytest.mark.anyio
async def test_a_callback_can_stop_the_run() -> None:
    result = await _pattern(callbacks=Scripted(ReflectionDecision.STOP)).execute(Outputs(["score=0.3", "x"]), "q")
    assert (result.convergence_reason, result.success) == (ConvergenceReason.USER_STOPPED, False)


@pytest.mark.anyio
async def test_a_callback_can_continue_past_a_met_threshold() -> None:
    callbacks = Scripted(ReflectionDecision.CONTINUE)
    result = await _pattern(callbacks=callbacks).execute(Outputs(["score=0.85", "score=0.95"]), "q")
    assert scores(result) == [0.85, 0.95] and result.convergence_reason is ConvergenceReason.QUALITY_MET


@pytest.mark.anyio
async def test_continue_does_not_override_the_token_budget() -> None:
    callbacks = Scripted(*[ReflectionDecision.CONTINUE] * 5)
    settings = ConvergenceSettings(token_budget=10)
    agent = Outputs([AgentOutput("score=0.1", usage=Usage(input_tokens=10)), AgentOutput("score=0.2")])
    result = await _pattern(callbacks=callbacks, convergence=settings).execute(agent, "q")
    assert result.convergence_reason is ConvergenceReason.TOKEN_BUDGET and result.iterations_used == 1


# --- revision strategies -------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("strategy", ["full_rewrite", "targeted_edit", "incremental"])
async def test_each_strategy_asks_in_its_own_words(strategy: str) -> None:
    agent = Outputs(["score=0.6 draft", "score=0.9"])
    await _pattern(revision_strategy=strategy).execute(agent, "q")
    assert INSTRUCTIONS[strategy] in agent.prompts[1]
    assert all(INSTRUCTIONS[other] not in agent.prompts[1] for other in INSTRUCTIONS if other != strategy)


def _evaluation(overall: float, failing: int) -> ReflectionEvaluation:
    crit = {f"c{i}": (0.1 if i < failing else 0.9) for i in range(4)}
    return ReflectionEvaluation(overall, crit, False)


def test_hybrid_chooses_by_the_score_and_the_number_of_failing_criteria() -> None:
    criteria = [QualityCriterion(f"c{i}", evaluator="regex", evaluator_config={"pattern": "x"}) for i in range(4)]
    assert choose_strategy("hybrid", _evaluation(0.3, 1), criteria, after_regression=False) == "full_rewrite"
    assert choose_strategy("hybrid", _evaluation(0.7, 2), criteria, after_regression=False) == "targeted_edit"
    assert choose_strategy("hybrid", _evaluation(0.6, 3), criteria, after_regression=False) == "incremental"
    assert choose_strategy("hybrid", _evaluation(0.7, 1), criteria, after_regression=True) == "incremental"
    assert choose_strategy("targeted_edit", _evaluation(0.1, 4), criteria, after_regression=True) == "targeted_edit"


@pytest.mark.anyio
async def test_prior_versions_and_earlier_reviews_are_shown_when_asked() -> None:
    agent = Outputs(["score=0.3 one", "score=0.5 two", "score=0.9"])
    await _pattern(include_prior_versions=True).execute(agent, "q")
    assert "## Earlier reviews\n- iteration 1 (score 0.30)" in agent.prompts[2]
    assert "### Iteration 1 (score 0.30)\nscore=0.3 one" in agent.prompts[2]
    quiet = Outputs(["score=0.3 one", "score=0.5 two", "score=0.9"])
    await _pattern(include_reflection_history=False).execute(quiet, "q")
    assert "## Earlier" not in quiet.prompts[2]


@pytest.mark.anyio
async def test_max_revision_tokens_reaches_the_agent() -> None:
    seen: list[int | None] = []

    class Agent:
        async def run(self, prompt: str, *, max_tokens: int | None = None) -> AgentOutput:
            seen.append(max_tokens)
            return AgentOutput("score=0.5" if len(seen) == 1 else "score=0.9")

    await _pattern(max_revision_tokens=256).execute(Agent(), "q")
    assert seen == [None, 256]


@pytest.mark.anyio
async def test_plain_functions_are_agents() -> None:
    calls: list[str] = []

    def agent(prompt: str) -> str:
        calls.append(prompt)
        return "score=0.9"

    async def async_agent(prompt: str) -> str:
        return "score=0.95"

    assert (await _pattern().execute(agent, "q")).best_output == "score=0.9"
    assert (await _pattern().execute(async_agent, "q")).best_output == "score=0.95"


@pytest.mark.anyio
async def test_without_preserve_all_versions_the_best_and_the_final_are_kept() -> None:
    pattern = _pattern(preserve_all_versions=False, max_iterations=3)
    result = await pattern.execute(Outputs(["score=0.3", "score=0.7", "score=0.5"]), "q")
    assert [v.iteration for v in result.history.versions] == [2, 3]
    assert result.history.total_iterations == 3 and pattern.get_best_version().iteration == 2


def test_unknown_settings_are_refused() -> None:
    for kw in ({"revision_strategy": "rewrite"}, {"best_version_selection": "best"}, {"max_iterations": 0},
               {"reflection_prompt": "judge {nothing}"}, {"reflection_triggers": ["sometimes"]}):
        with pytest.raises(ValueError):
            _pattern(**kw)


@pytest.mark.anyio
async def test_an_unstructured_review_reads_as_prose() -> None:
    agent = Outputs(["score=0.3", "score=0.9"])
    await _pattern(structured_reflection=False).execute(agent, "q")
    review = agent.prompts[1].split("## The review\n")[1].split("\n\n")[0]
    assert review == "the weighted score 0.30 is below the quality threshold 0.80."


@pytest.mark.anyio
async def test_revise_and_reflect_can_be_called_on_their_own() -> None:
    pattern = _pattern(revision_strategy="targeted_edit")
    with pytest.raises(ValueError, match="revise needs an agent"):
        await pattern.revise("x", ReflectionEvaluation(0.1, {}, False))
    agent = Outputs(["score=0.5 draft", "score=0.9 revised"])
    await pattern.execute(agent, "q")
    evaluation = await pattern.reflect("score=0.4 other")
    assert await pattern.revise("score=0.4 other", evaluation) == "score=0.9 revised"
    assert INSTRUCTIONS["targeted_edit"] in agent.prompts[-1] and "score=0.4 other" in agent.prompts[-1]
    assert pattern.get_history().total_iterations == 2
