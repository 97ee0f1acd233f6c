"""Resampling held to reflexion's tokens: the comparison at equal budget, per problem.

The resample mode gets the same attempt budget as reflexion (4); its attempts are cheaper
(no diff, no failure output, no reflection call), so at equal attempts it also spends
fewer tokens. For the other direction, resampling is given reflexion's total tokens over
the problems both ran, spent breadth-first as a budgeted run would: every problem's first
sample, then a second sample for each problem still unsolved, and so on, in problem order,
until the next sample no longer fits. (Cutting each problem at reflexion's tokens on that
problem instead is unfair to sampling: a sampled first reply a few tokens longer than the
greedy one would count as a failure.)
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.humaneval.results import ProblemResult, ResultFile

SAMPLED_MODE = "resample"
REPAIR_MODES = ("reflexion", "reflexion1", "adaptive")  # each held against resampling, in this order


@dataclass(frozen=True)
class Matched:
    """One row of the comparison: a mode's figures over the problems both modes finished."""

    label: str
    problems: int
    solved: int
    tokens: int

    @property
    def tokens_per_solved(self) -> float | None:
        return self.tokens / self.solved if self.solved else None


def within_total(results: list[ProblemResult], budget: int) -> tuple[int, int]:
    """(problems solved, tokens spent) when `budget` tokens are spent breadth-first."""
    solved, spent = set(), 0
    rounds = max((len(r.attempt_tokens) for r in results), default=0)
    for number in range(1, rounds + 1):
        for index, result in enumerate(results):
            if index in solved or len(result.attempt_tokens) < number:
                continue
            cost = result.attempt_tokens[number - 1]
            if spent + cost > budget:
                return len(solved), spent
            spent += cost
            if result.passed_at == number:
                solved.add(index)
    return len(solved), spent


def matched_rows(results: ResultFile) -> list[Matched]:
    """For each repair mode the file holds: it, resample as run, and resample given its total
    tokens (breadth-first); over the problems both finished."""
    rows: list[Matched] = []
    for mode in REPAIR_MODES:
        rows += _matched(results, mode)
    return rows


def _matched(results: ResultFile, budget_name: str) -> list[Matched]:
    budget_mode, sampled_mode = results.modes.get(budget_name), results.modes.get(SAMPLED_MODE)
    if budget_mode is None or sampled_mode is None:
        return []
    both = [p for p in results.selection if p in budget_mode.problems and p in sampled_mode.problems]
    if not both:
        return []
    budget = sum(budget_mode.problems[p].tokens for p in both)
    sampled = [sampled_mode.problems[p] for p in both]
    capped_solved, capped_spent = within_total(sampled, budget)
    return [
        Matched(budget_mode.settings.label, len(both),
                sum(budget_mode.problems[p].passed_at is not None for p in both), budget),
        Matched(sampled_mode.settings.label, len(both),
                sum(r.passed_at is not None for r in sampled), sum(r.tokens for r in sampled)),
        Matched(f"{sampled_mode.settings.label}, within the tokens of {budget_mode.settings.label}", len(both),
                capped_solved, capped_spent),
    ]
