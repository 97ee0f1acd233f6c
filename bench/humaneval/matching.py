"""Resampling held to reflexion's tokens: the comparison at equal budget, per problem.

The resample mode gets the same attempt budget as reflexion (4); its attempts are cheaper
(no diff, no failure output, no reflection call), so at equal attempts it also spends
fewer tokens. For the other direction, each problem's resample run is cut, after the fact,
at the tokens reflexion spent on that problem: an attempt counts only while the tokens
spent up to its end stay within that budget. This is what a run capped at the budget
would have scored, since a capped run stops at the first attempt it cannot pay for.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.humaneval.results import ProblemResult, ResultFile

BUDGET_MODE, SAMPLED_MODE = "reflexion", "resample"


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


def within(result: ProblemResult, budget: int) -> tuple[bool, int]:
    """(passed within `budget` tokens, tokens spent up to where a capped run would stop)."""
    spent = 0
    for number, tokens in enumerate(result.attempt_tokens, start=1):
        if spent + tokens > budget:
            return False, spent
        spent += tokens
        if result.passed_at == number:
            return True, spent
    return False, spent


def matched_rows(results: ResultFile) -> list[Matched]:
    """reflexion, resample as run, and resample within reflexion's tokens per problem;
    empty unless the file holds both modes with a problem in common."""
    budget_mode, sampled_mode = results.modes.get(BUDGET_MODE), results.modes.get(SAMPLED_MODE)
    if budget_mode is None or sampled_mode is None:
        return []
    both = [p for p in results.selection if p in budget_mode.problems and p in sampled_mode.problems]
    if not both:
        return []
    budgets = {p: budget_mode.problems[p].tokens for p in both}
    sampled = {p: sampled_mode.problems[p] for p in both}
    capped = {p: within(sampled[p], budgets[p]) for p in both}
    return [
        Matched(budget_mode.settings.label, len(both),
                sum(budget_mode.problems[p].passed_at is not None for p in both), sum(budgets.values())),
        Matched(sampled_mode.settings.label, len(both),
                sum(r.passed_at is not None for r in sampled.values()), sum(r.tokens for r in sampled.values())),
        Matched(f"{sampled_mode.settings.label}, within {budget_mode.settings.label}' tokens", len(both),
                sum(ok for ok, _ in capped.values()), sum(spent for _, spent in capped.values())),
    ]
