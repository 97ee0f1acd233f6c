"""Each reflection trigger, and what it adds to a version (see reflection/pattern/triggers.py)."""

from __future__ import annotations

import pytest
from pattern_kit import QUALITY, Outputs, scores

from reflection.pattern import (
    AgentError,
    AgentOutput,
    AgentStep,
    ConvergenceReason,
    ReflectionCallbacks,
    ReflectionPattern,
    ToolResult,
)


def _pattern(**kw: object) -> ReflectionPattern:
    kw.setdefault("quality_criteria", [QUALITY])
    kw.setdefault("max_iterations", 5)
    return ReflectionPattern(**kw)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_completion_is_always_on() -> None:
    result = await _pattern(reflection_triggers=[]).execute(Outputs(["score=0.9"]), "q")
    assert result.history.versions[0].extra["triggers"] == ["completion"]


@pytest.mark.anyio
async def test_step_interval_scores_every_nth_step_and_reports_its_issues() -> None:
    steps = [AgentStep("score=0.9 plan"), AgentStep("score=0.2 half-done"), AgentStep("score=0.9"),
             AgentStep("score=0.1 broken helper")]
    agent = Outputs([AgentOutput("score=0.5 answer", steps=steps), "score=0.9"])
    result = await _pattern(reflection_triggers=["completion", "step_interval"], reflection_interval=2).execute(agent, "q")
    first = result.history.versions[0]
    assert first.extra["triggers"] == ["completion", "step_interval", "step_interval"]
    assert [i for i in first.evaluation.issues if i.startswith("after step")] == [
        "after step 2: the weighted score 0.20 is below the quality threshold 0.80",
        "after step 4: the weighted score 0.10 is below the quality threshold 0.80",
    ]
    assert "after step 4" in agent.prompts[1]


@pytest.mark.anyio
async def test_an_agent_error_is_reflected_on_with_the_error_trigger() -> None:
    agent = Outputs([RuntimeError("tool crashed"), "score=0.9 recovered"])
    result = await _pattern(reflect_on_error=True).execute(agent, "q")
    assert scores(result) == [0.0, 0.9] and result.success
    failed = result.history.versions[0]
    assert failed.extra["triggers"] == ["completion", "error"]
    assert failed.evaluation.issues == ["the run failed: RuntimeError: tool crashed"]
    assert "the run failed: RuntimeError: tool crashed" in agent.prompts[1]


@pytest.mark.anyio
async def test_a_reported_error_and_a_step_error_are_issues_with_the_error_trigger() -> None:
    reported = AgentOutput("partial", error="ran out of context")
    stepped = AgentOutput("score=0.95", steps=[AgentStep("call", error="timeout talking to the API")])
    result = await _pattern(reflection_triggers=["error"], max_iterations=2).execute(Outputs([reported, stepped]), "q")
    assert result.history.versions[0].evaluation.issues == ["the run failed: ran out of context"]
    last = result.history.versions[1]
    assert last.evaluation.issues[-1] == "step 1 hit an error: timeout talking to the API"
    assert not last.evaluation.satisfactory  # an error on the way keeps it from passing


@pytest.mark.anyio
async def test_without_the_error_trigger_an_agent_error_raises() -> None:
    with pytest.raises(AgentError, match="tool crashed"):
        await _pattern().execute(Outputs([RuntimeError("tool crashed")]), "q")
    with pytest.raises(AgentError, match="reported an error: no"):
        await _pattern().execute(Outputs([AgentOutput("", error="no")]), "q")


@pytest.mark.anyio
async def test_watched_tool_results_are_shown_and_a_failed_one_is_an_issue() -> None:
    results = [ToolResult("pytest", "1 failed: test_empty", ok=False), ToolResult("ls", "a.py b.py")]
    agent = Outputs([AgentOutput("score=0.9 code", tool_results=results), "score=0.9 fixed"])
    result = await _pattern(reflect_on_tools=["pytest"]).execute(agent, "q")
    first = result.history.versions[0]
    assert "tool_result" in first.extra["triggers"] and not first.evaluation.satisfactory
    assert first.evaluation.issues == ["tool pytest failed: 1 failed: test_empty"]
    assert "## Tool results\n- pytest (failed): 1 failed: test_empty" in agent.prompts[1]
    assert "a.py b.py" not in agent.prompts[1]  # ls is not watched
    assert result.success and result.iterations_used == 2


@pytest.mark.anyio
async def test_a_manual_request_adds_one_round_past_a_met_threshold() -> None:
    class Again(ReflectionCallbacks):
        def __init__(self, pattern: ReflectionPattern) -> None:
            self.pattern = pattern

        async def on_generation(self, output: str, iteration: int) -> None:
            if iteration == 1:
                self.pattern.request_reflection()

    pattern = _pattern()
    pattern.callbacks = Again(pattern)
    result = await pattern.execute(Outputs(["score=0.85 good", "score=0.95 better", "score=0.99"]), "q")
    assert scores(result) == [0.85, 0.95] and result.convergence_reason is ConvergenceReason.QUALITY_MET
    plain = await _pattern().execute(Outputs(["score=0.85 good", "score=0.95 better"]), "q")
    assert plain.iterations_used == 1


@pytest.mark.anyio
async def test_a_quality_drop_names_what_fell_and_reverts_even_without_rollback() -> None:
    from reflection.pattern import ConvergenceSettings

    agent = Outputs(["score=0.7 good", "score=0.3 bad", "score=0.9"])
    pattern = _pattern(quality_drop_threshold=0.2, convergence=ConvergenceSettings(rollback_regressions=False))
    result = await pattern.execute(agent, "q")
    dropped = result.history.versions[1]
    assert "quality_drop" in dropped.extra["triggers"]
    assert dropped.evaluation.issues[0] == (
        "quality fell from 0.70 to 0.30 in the last revision; bring back what the earlier version did right"
    )
    assert "score=0.7 good" in agent.prompts[2].split("## The review")[0]  # revised from the best
    assert result.history.versions[2].extra["revisedFrom"] == 1


@pytest.mark.anyio
async def test_a_small_drop_does_not_trigger() -> None:
    agent = Outputs(["score=0.7", "score=0.6", "score=0.9"])
    result = await _pattern(quality_drop_threshold=0.2).execute(agent, "q")
    assert "quality_drop" not in result.history.versions[1].extra["triggers"]


@pytest.mark.parametrize("kw", [
    {"reflection_triggers": ["step_interval"]}, {"reflection_triggers": ["tool_result"]},
    {"reflection_triggers": ["quality_drop"]}, {"reflection_interval": 0},
])  # fmt: skip
def test_a_trigger_without_its_setting_is_refused(kw: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        _pattern(**kw)
