"""StopReason: when retries stop, roll back or go on, and which attempt is best."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from orchestrator.checks.convergence import AttemptScore, Decision, ProgressTracker, StopReason
from orchestrator.checks.verify import CommandResult, Verdict
from reflection.digest import Digest


def _a(
    number: int,
    score: float,
    failing: Sequence[str] = (),
    signature: str | None = None,
    *,
    passed: bool = False,
) -> AttemptScore:
    return AttemptScore(number, score, frozenset(failing), signature, passed=passed)


def _run(tracker: ProgressTracker, scores: Sequence[float]) -> list[Decision]:
    """Record failing attempts 1..n with the given scores and distinct signatures."""
    return [tracker.record(_a(i, s, signature=f"sig{i}")) for i, s in enumerate(scores, start=1)]


# --- steady progress and passing -----------------------------------------------------------------


def test_a_steadily_improving_subtask_is_never_stopped() -> None:
    tracker = ProgressTracker()
    decisions = _run(tracker, [0.1, 0.2, 0.3, 0.45, 0.5, 0.7, 0.8, 0.9, 0.95])
    assert [d.action for d in decisions] == ["continue"] * 9
    assert all(d.reason is None and d.rollback_to is None for d in decisions)
    assert decisions[3].explanation == "attempt 4 (score 0.45) improved on attempt 3 (score 0.30)"
    assert tracker.best is not None and tracker.best.number == 9
    assert [a.number for a in tracker.history] == list(range(1, 10))


def test_the_first_failed_attempt_continues() -> None:
    decision = ProgressTracker().record(_a(1, 0.5, ["t::a", "t::b"]))
    assert decision == Decision("continue", None, "attempt 1 (score 0.50, 2 failing) failed")


def test_a_passing_attempt_stops_with_passed_whatever_came_before() -> None:
    tracker = ProgressTracker()
    _run(tracker, [0.5, 0.8, 0.2])
    decision = tracker.record(_a(4, 1.0, passed=True))
    assert (decision.action, decision.reason) == ("stop", StopReason.PASSED)
    assert decision.explanation == "attempt 4 passed verification"
    assert decision.rollback_to is None


def test_a_full_score_without_passing_verification_is_not_a_pass() -> None:
    # e.g. every test passed but a coverage threshold failed the run
    decision = ProgressTracker().record(_a(1, 1.0))
    assert decision.action == "continue" and decision.reason is None


# --- plateau -------------------------------------------------------------------------------------


def test_two_attempts_in_a_row_without_improvement_stop_with_plateau() -> None:
    decisions = _run(ProgressTracker(), [0.5, 0.5, 0.5])
    assert [d.action for d in decisions] == ["continue", "continue", "stop"]
    assert decisions[1].explanation == "attempt 2 (score 0.50) did not improve on attempt 1 (score 0.50)"
    assert decisions[2].reason is StopReason.PLATEAU
    assert decisions[2].explanation == (
        "attempts 2 to 3 did not improve on the best score so far (0.50); "
        "more retries are unlikely to help"
    )


def test_an_improvement_resets_the_plateau_count() -> None:
    decisions = _run(ProgressTracker(), [0.5, 0.5, 0.6, 0.6, 0.6])
    assert [d.action for d in decisions] == ["continue"] * 4 + ["stop"]
    assert decisions[-1].reason is StopReason.PLATEAU


def test_plateau_is_measured_against_the_best_attempt_not_the_last_one() -> None:
    # 0.7 is better than the 0.6 before it, but not better than the best, 0.8
    tracker = ProgressTracker(rollback_regressions=False)
    decisions = _run(tracker, [0.8, 0.6, 0.7])
    assert decisions[-1].reason is StopReason.PLATEAU


def test_the_plateau_window_and_switch_are_configurable() -> None:
    assert _run(ProgressTracker(plateau_window=1), [0.5, 0.5])[-1].reason is StopReason.PLATEAU
    wide = _run(ProgressTracker(plateau_window=3), [0.5, 0.5, 0.5, 0.5])
    assert [d.action for d in wide] == ["continue"] * 3 + ["stop"]
    off = _run(ProgressTracker(stop_on_plateau=False), [0.5] * 6)
    assert all(d.action == "continue" for d in off)


def test_gains_below_min_improvement_do_not_count_as_progress() -> None:
    decisions = _run(ProgressTracker(min_improvement=0.05), [0.50, 0.52, 0.53])
    assert decisions[-1].reason is StopReason.PLATEAU
    assert _run(ProgressTracker(), [0.50, 0.52, 0.53])[-1].action == "continue"


# --- unknown counts: scores of 0 and 1 only, failing tests break ties ----------------------------


def test_fewer_failing_tests_is_progress_when_the_score_is_unknown() -> None:
    tracker = ProgressTracker()
    decisions = [
        tracker.record(_a(1, 0.0, ["a", "b", "c"], "s1")),
        tracker.record(_a(2, 0.0, ["a", "b"], "s2")),
        tracker.record(_a(3, 0.0, ["a"], "s3")),
    ]
    assert [d.action for d in decisions] == ["continue"] * 3
    assert tracker.best is not None and tracker.best.number == 3


def test_more_failing_tests_at_an_equal_score_is_a_regression() -> None:
    tracker = ProgressTracker()
    tracker.record(_a(1, 0.0, ["a"], "s1"))
    decision = tracker.record(_a(2, 0.0, ["a", "b"], "s2"))
    assert (decision.action, decision.reason, decision.rollback_to) == (
        "rollback",
        StopReason.REGRESSION,
        1,
    )


def test_a_crash_that_names_no_tests_is_not_mistaken_for_progress() -> None:
    tracker = ProgressTracker()
    tracker.record(_a(1, 0.0, ["a", "b"], "s1"))
    decision = tracker.record(_a(2, 0.0, [], "crash"))
    assert decision.action == "continue"
    assert "did not improve" in decision.explanation
    assert tracker.best is not None and tracker.best.number == 2  # a tie: the latest


def test_failures_without_counts_or_names_plateau() -> None:
    decisions = _run(ProgressTracker(), [0.0, 0.0, 0.0])
    assert decisions[-1].reason is StopReason.PLATEAU


def test_the_score_decides_before_the_failing_tests() -> None:
    # Fewer failing tests but a lower share passing: tests vanished, not progress.
    tracker = ProgressTracker()
    tracker.record(_a(1, 0.8, ["a", "b"], "s1"))
    decision = tracker.record(_a(2, 0.5, ["a"], "s2"))
    assert decision.reason is StopReason.REGRESSION


# --- best attempt and regression -----------------------------------------------------------------


def test_on_a_tie_the_latest_attempt_is_best() -> None:
    tracker = ProgressTracker(stop_on_plateau=False)
    _run(tracker, [0.6, 0.4, 0.6, 0.5])
    assert tracker.best is not None and tracker.best.number == 3


def test_an_attempt_worse_than_the_best_rolls_back_to_it() -> None:
    decisions = _run(ProgressTracker(), [0.5, 0.8, 0.6])
    last = decisions[-1]
    assert (last.action, last.reason, last.rollback_to) == ("rollback", StopReason.REGRESSION, 2)
    assert last.explanation == (
        "attempt 3 (score 0.60) regressed from attempt 2 (score 0.80); "
        "the next retry starts from attempt 2's changes"
    )


def test_rollback_can_be_switched_off_but_the_best_attempt_is_still_named() -> None:
    decision = _run(ProgressTracker(rollback_regressions=False), [0.5, 0.8, 0.6])[-1]
    assert (decision.action, decision.reason, decision.rollback_to) == ("continue", None, 2)


def test_a_regression_that_ends_a_plateau_stops_and_still_names_the_best() -> None:
    decision = _run(ProgressTracker(), [0.8, 0.8, 0.6])[-1]
    assert (decision.action, decision.reason, decision.rollback_to) == ("stop", StopReason.PLATEAU, 2)


# --- oscillation ---------------------------------------------------------------------------------


def test_scores_going_up_down_up_stop_with_oscillation() -> None:
    decisions = _run(ProgressTracker(), [0.5, 0.8, 0.6, 0.8])
    assert [d.action for d in decisions] == ["continue", "continue", "rollback", "stop"]
    assert decisions[-1].reason is StopReason.OSCILLATION
    assert decisions[-1].explanation == (
        "scores went up and down over attempts 1 to 4 (0.50 → 0.80 → 0.60 → 0.80); "
        "retries are not converging"
    )


def test_scores_going_down_up_down_stop_with_oscillation() -> None:
    decisions = _run(ProgressTracker(stop_on_plateau=False), [0.8, 0.5, 0.7, 0.4])
    assert decisions[-1].reason is StopReason.OSCILLATION
    assert decisions[-1].rollback_to == 1


def test_up_and_down_to_a_new_best_is_progress_not_oscillation() -> None:
    decisions = _run(ProgressTracker(), [0.5, 0.8, 0.6, 0.9])
    assert decisions[-1].action == "continue"
    assert decisions[-1].explanation.startswith("attempt 4 (score 0.90) improved")


def test_an_unchanged_score_breaks_the_alternation() -> None:
    decisions = _run(ProgressTracker(stop_on_plateau=False), [0.5, 0.8, 0.8, 0.6, 0.8])
    assert all(d.reason is not StopReason.OSCILLATION for d in decisions[:4])


def test_without_oscillation_stops_the_plateau_rule_still_applies() -> None:
    decisions = _run(ProgressTracker(stop_on_oscillation=False), [0.5, 0.8, 0.6, 0.8])
    assert decisions[-1].reason is StopReason.PLATEAU


def test_returning_to_an_earlier_failure_is_oscillation() -> None:
    tracker = ProgressTracker(stop_on_plateau=False)
    decisions = [
        tracker.record(_a(1, 0.5, ["t::a"], "A")),
        tracker.record(_a(2, 0.5, ["t::b"], "B")),
        tracker.record(_a(3, 0.5, ["t::a"], "A")),
    ]
    assert decisions[-1].reason is StopReason.OSCILLATION
    assert decisions[-1].explanation == (
        "attempt 3 failed exactly as attempt 1 did, after attempt 2 failed differently; "
        "the retries are going in circles"
    )


def test_without_signatures_the_failing_tests_identify_a_repeat() -> None:
    tracker = ProgressTracker(stop_on_plateau=False)
    for number, failing in enumerate([["a"], ["b"], ["a"]], start=1):
        decision = tracker.record(_a(number, 0.0, failing))
    assert decision.reason is StopReason.OSCILLATION


def test_a_repeat_that_improves_the_score_is_not_stopped() -> None:
    tracker = ProgressTracker()
    tracker.record(_a(1, 0.5, signature="A"))
    tracker.record(_a(2, 0.4, signature="B"))
    decision = tracker.record(_a(3, 0.6, signature="A"))
    assert decision.action == "continue"


# --- repeated signature --------------------------------------------------------------------------


def test_the_same_failure_twice_is_flagged_for_the_next_reflection() -> None:
    tracker = ProgressTracker()
    first = tracker.record(_a(1, 0.5, ["t::a"], "A"))
    second = tracker.record(_a(2, 0.5, ["t::a"], "A"))
    assert not first.repeated_signature
    assert second.repeated_signature and second.action == "continue"
    assert second.explanation.endswith(
        "; it failed exactly as attempt 1 did, so that reflection did not help"
    )
    third = tracker.record(_a(3, 0.5, ["t::a"], "A"))
    assert third.repeated_signature and third.reason is StopReason.PLATEAU


def test_missing_signatures_are_never_a_repeat() -> None:
    tracker = ProgressTracker()
    tracker.record(_a(1, 0.5))
    assert not tracker.record(_a(2, 0.6)).repeated_signature


# --- environment, verdicts, validation -----------------------------------------------------------


def _digest(failing: list[str], passed: int | None, failed: int | None) -> Digest:
    return Digest(
        tool="pytest",
        text="...",
        signature="abcd1234abcd1234",
        failing_tests=failing,
        first_error=None,
        passed=passed,
        failed=failed,
    )


def test_a_verdict_with_counts_scores_its_share_of_passing_tests() -> None:
    step = CommandResult(command="pytest", kind="test", exit_code=1, output="")
    verdict = Verdict(
        passed=False,
        digest=_digest(["t.py::a", "t.py::b"], 8, 2),
        steps=[step],
        tests_passed=8,
        tests_failed=2,
    )
    score = AttemptScore.from_verdict(3, verdict)
    assert score == AttemptScore(3, 0.8, frozenset({"t.py::a", "t.py::b"}), "abcd1234abcd1234")


def test_a_passing_verdict_scores_full_and_stops() -> None:
    step = CommandResult(command="pytest", kind="test", exit_code=0, output="")
    verdict = Verdict(passed=True, steps=[step])
    score = AttemptScore.from_verdict(1, verdict)
    assert (score.score, score.passed) == (1.0, True)
    assert ProgressTracker().record(score).reason is StopReason.PASSED


def test_a_check_that_cannot_run_stops_with_environment_at_once() -> None:
    step = CommandResult(command="pytset", kind="test", exit_code=127, output="pytset: not found")
    verdict = Verdict(passed=False, digest=_digest([], None, None), steps=[step])
    score = AttemptScore.from_verdict(1, verdict)
    assert (score.score, score.environment) == (0.0, True)
    decision = ProgressTracker().record(score)
    assert (decision.action, decision.reason) == ("stop", StopReason.ENVIRONMENT)
    assert "could not run" in decision.explanation


def test_decisions_become_camel_case_run_log_fields() -> None:
    decision = _run(ProgressTracker(), [0.5, 0.8, 0.6])[-1]
    assert decision.as_event() == {
        "action": "rollback",
        "reason": "regression",
        "explanation": decision.explanation,
        "repeatedSignature": False,
        "rollbackTo": 2,
    }


def test_the_stop_reasons_are_exactly_the_documented_ones() -> None:
    assert [c.value for c in StopReason] == [
        "passed", "max_retries", "plateau", "oscillation", "regression", "budget", "environment", "diminishing",
    ]  # fmt: skip


def test_attempts_must_be_recorded_in_order() -> None:
    tracker = ProgressTracker()
    tracker.record(_a(2, 0.5))
    with pytest.raises(ValueError, match="attempt 2 recorded after attempt 2"):
        tracker.record(_a(2, 0.6))


@pytest.mark.parametrize("kwargs", [{"plateau_window": 0}, {"min_improvement": -0.1}])
def test_bad_thresholds_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        ProgressTracker(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("score", [-0.1, 1.5])
def test_scores_outside_zero_to_one_are_refused(score: float) -> None:
    with pytest.raises(ValueError, match=r"within 0\.\.1"):
        AttemptScore(1, score)


def test_a_new_best_that_gains_too_little_stops_as_diminishing_returns() -> None:
    tracker = ProgressTracker(improvement_threshold=0.05)
    assert tracker.record(AttemptScore(1, 0.50)).action == "continue"
    assert tracker.record(AttemptScore(2, 0.70)).action == "continue"  # a real gain
    small = tracker.record(AttemptScore(3, 0.72))
    assert (small.action, small.reason) == ("stop", StopReason.DIMINISHING)
    assert tracker.best is not None and tracker.best.number == 3  # the small gain is still kept
    assert ProgressTracker().record(AttemptScore(1, 0.5)).action == "continue"  # off by default
