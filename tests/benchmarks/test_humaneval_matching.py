"""Resampling given reflexion's tokens: the budget is spent breadth-first, as a capped run would."""

from __future__ import annotations

from bench.humaneval.matching import within_total
from bench.humaneval.results import ProblemResult


def result(tokens: list[int], passed_at: int | None) -> ProblemResult:
    return ProblemResult(outcome="passed" if passed_at else "failed", passed_at=passed_at,
                         attempts=len(tokens), attempt_tokens=tokens)


def test_every_problem_gets_its_first_sample_before_any_gets_a_second() -> None:
    hard, easy = result([100, 100], 2), result([150], 1)
    assert within_total([hard, easy], 260) == (1, 250)  # hard's second sample does not fit
    assert within_total([hard, easy], 350) == (2, 350)


def test_a_first_sample_longer_than_the_greedy_reply_still_counts_when_the_total_fits() -> None:
    samples = [result([110], 1), result([95], 1), result([100, 90], 2)]
    assert within_total(samples, 400) == (3, 395)
    assert within_total(samples, 394) == (2, 305)
