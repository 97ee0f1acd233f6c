"""The seed's success metrics in a run's history, and the judge asked more than once so
that its consistency is measured: as docs/PATTERN.md uses the pattern, with a scripted
model as the judge."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from reflection.llm import LiteLLMModel
from reflection.pattern import QualityCriterion, ReflectionHistory, ReflectionPattern
from reflection.scripted import scripted_script

USAGE = {"inputTokens": 100, "outputTokens": 10}


def _verdict(draft: str, score: float, times: int = 1) -> dict[str, object]:
    reply = orjson.dumps({"scores": [{"name": "correctness", "score": score, "reasoning": f"{draft} judged"}],
                          "issues": [f"{draft} misses a case"], "confidence": 0.7}).decode()
    return {"match": draft, "reply": reply, "times": times, "usage": USAGE}


def _drafts() -> tuple[list[str], object]:
    prompts: list[str] = []

    def agent(prompt: str) -> str:
        prompts.append(prompt)
        return ["draft one", "draft two", "draft three"][min(len(prompts), 3) - 1]

    return prompts, agent


def _pattern(script: str, **kw: object) -> ReflectionPattern:
    kw.setdefault("max_iterations", 4)
    return ReflectionPattern(quality_criteria=[QualityCriterion("correctness")],
                             reflection_model=LiteLLMModel(script, backoff_s=0.001), **kw)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_the_history_reports_improvement_and_iterations_to_the_threshold(tmp_path: Path) -> None:
    # One reply per draft: judged once by default, a second call would find none left.
    script = scripted_script([_verdict("draft one", 0.4), _verdict("draft two", 0.6), _verdict("draft three", 0.9)],
                             dir=tmp_path)
    _, agent = _drafts()
    result = await _pattern(script).execute(agent, "write it")
    metrics = result.history.metrics
    assert metrics is not None
    assert (metrics.initial_score, metrics.best_score, metrics.improvement) == (0.4, 0.9, 0.5)
    assert metrics.improvement_per_iteration == [0.2, 0.3] and metrics.iterations_to_threshold == 3
    assert (metrics.judge_spread, metrics.disagreements) == (None, 0)  # not measured: asked once
    assert all(v.evaluation.judgements == 1 for v in result.history.versions)
    stored = result.history.as_dict()
    assert stored["metrics"]["improvementPerIteration"] == [0.2, 0.3]
    assert "judgeSpread" not in stored["versions"][0]["evaluation"]
    assert ReflectionHistory.from_dict(stored).metrics == metrics


@pytest.mark.anyio
async def test_a_run_that_never_meets_the_bar_has_no_iterations_to_threshold(tmp_path: Path) -> None:
    script = scripted_script([_verdict("draft", 0.5, times=None)], dir=tmp_path)  # type: ignore[arg-type]
    _, agent = _drafts()
    result = await _pattern(script, max_iterations=2).execute(agent, "write it")
    metrics = result.history.metrics
    assert metrics is not None and metrics.iterations_to_threshold is None and metrics.improvement == 0.0


@pytest.mark.anyio
async def test_repeated_judging_reports_the_spread_and_flags_a_disagreement(tmp_path: Path) -> None:
    script = scripted_script([
        _verdict("draft one", 0.4), _verdict("draft one", 0.45), _verdict("draft one", 0.7),
        _verdict("draft two", 0.9, times=3),
    ], dir=tmp_path)
    _, agent = _drafts()
    result = await _pattern(script, judge_repeats=3).execute(agent, "write it")
    first, second = (v.evaluation for v in result.history.versions)
    assert first.judgements == 3 and first.judge_spread == {"correctness": 0.3} and first.judge_disagreement
    assert first.overall_score == pytest.approx((0.4 + 0.45 + 0.7) / 3)  # the mean, not one lucky answer
    assert second.judge_spread == {"correctness": 0.0} and not second.judge_disagreement and result.success
    assert result.history.versions[0].token_usage.input_tokens == 300  # three judgements paid for
    metrics = result.history.metrics
    assert metrics is not None and (metrics.judge_spread, metrics.disagreements) == (0.3, 1)
    assert result.history.as_dict()["versions"][0]["evaluation"]["judgeDisagreement"] is True


def test_judge_repeats_below_one_is_refused_in_a_sentence(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="^judge_repeats must be at least 1$"):
        _pattern(scripted_script([], dir=tmp_path), judge_repeats=0)
