"""The shared convergence rules beyond the golden loop's: diminishing returns, semantic
stability, the token budget, and the pattern's own words."""

from __future__ import annotations

import pytest

from reflection.pattern import ConvergenceReason, ConvergenceSettings, ConvergenceTracker, Step
from reflection.pattern.convergence import Wording, similarity


def _steps(tracker: ConvergenceTracker, scores: list[float], **kw: object) -> list:
    return [tracker.record(Step(i, s, signature=f"s{i}", **kw)) for i, s in enumerate(scores, start=1)]  # type: ignore[arg-type]


def test_a_small_new_best_stops_with_diminishing_returns_and_is_kept_as_best() -> None:
    tracker = ConvergenceTracker(ConvergenceSettings(improvement_threshold=0.05))
    decisions = _steps(tracker, [0.5, 0.7, 0.72])
    assert [d.action for d in decisions] == ["continue", "continue", "stop"]
    assert decisions[-1].reason is ConvergenceReason.DIMINISHING_RETURNS
    assert "by only 0.02, less than 0.05" in decisions[-1].explanation
    assert tracker.best is not None and tracker.best.number == 3


def test_the_first_step_and_large_gains_are_never_diminishing() -> None:
    tracker = ConvergenceTracker(ConvergenceSettings(improvement_threshold=0.05))
    assert [d.action for d in _steps(tracker, [0.01, 0.5, 0.9])] == ["continue"] * 3


def test_a_gain_told_only_by_fewer_failing_items_is_not_diminishing() -> None:
    tracker = ConvergenceTracker(ConvergenceSettings(improvement_threshold=0.05))
    tracker.record(Step(1, 0.0, frozenset({"a", "b"})))
    assert tracker.record(Step(2, 0.0, frozenset({"a"}))).action == "continue"


def test_an_unchanged_output_stops_with_semantic_stability() -> None:
    tracker = ConvergenceTracker(ConvergenceSettings(stability_threshold=0.95), Wording(noun="iteration"))
    tracker.record(Step(1, 0.5, output="def f():\n    return 1\n"))
    decision = tracker.record(Step(2, 0.5, output="def f():  return 1"))  # only whitespace differs
    assert decision.reason is ConvergenceReason.SEMANTIC_STABILITY
    assert decision.explanation == (
        "iteration 2's output is 100% the same as iteration 1's; revising no longer changes it"
    )


def test_a_changed_output_or_a_new_best_is_not_stable() -> None:
    tracker = ConvergenceTracker(ConvergenceSettings(stability_threshold=0.95, stop_on_plateau=False))
    tracker.record(Step(1, 0.5, output="alpha beta gamma"))
    assert tracker.record(Step(2, 0.5, output="something else entirely")).action == "continue"
    assert tracker.record(Step(3, 0.9, output="something else entirely")).action == "continue"
    assert similarity("abc", "abd") < 1.0


def test_the_token_budget_stops_even_a_new_best() -> None:
    tracker = ConvergenceTracker(ConvergenceSettings(token_budget=100))
    assert tracker.record(Step(1, 0.2, tokens=60)).action == "continue"
    decision = tracker.record(Step(2, 0.9, tokens=50))
    assert (decision.action, decision.reason) == ("stop", ConvergenceReason.TOKEN_BUDGET)
    assert decision.explanation == "110 tokens spent by attempt 2 reach the budget of 100"


def test_quality_met_uses_the_callers_words() -> None:
    tracker = ConvergenceTracker(wording=Wording(noun="iteration", satisfied="met the quality threshold"))
    decision = tracker.record(Step(1, 0.9, satisfied=True))
    assert decision.reason is ConvergenceReason.QUALITY_MET
    assert decision.explanation == "iteration 1 met the quality threshold"


def test_the_reason_values_are_the_seeds_plus_the_loops() -> None:
    assert {r.value for r in ConvergenceReason} == {
        "quality_met", "max_iterations", "plateau", "oscillation", "diminishing", "user_accepted",
        "token_budget", "stable", "regression", "environment", "user_stopped",
    }  # fmt: skip


@pytest.mark.parametrize("kwargs", [
    {"plateau_iterations": 0}, {"min_improvement": -1.0}, {"improvement_threshold": -0.1},
    {"stability_threshold": 0.0}, {"stability_threshold": 1.5}, {"token_budget": 0},
])  # fmt: skip
def test_bad_settings_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        ConvergenceSettings(**kwargs)  # type: ignore[arg-type]


def test_the_loops_adapter_maps_diminishing_returns() -> None:
    from orchestrator.checks.convergence import AttemptScore, ProgressTracker, StopReason

    tracker = ProgressTracker(improvement_threshold=0.05)
    tracker.record(AttemptScore(1, 0.5))
    decision = tracker.record(AttemptScore(2, 0.52))
    assert decision.reason is StopReason.DIMINISHING and decision.action == "stop"
    assert tracker.best == AttemptScore(2, 0.52)
