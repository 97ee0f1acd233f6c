"""A run's success metrics, as the seed's section 6 measures the pattern.

- improvement: the score of each version over the one before (`improvement_per_iteration`)
  and of the best version over the first (`improvement`: "the final output scores higher
  than the initial one" is `improvement > 0`);
- convergence: the iteration whose version first met the bar (`iterations_to_threshold`,
  None when none did; "within 3 iterations" is `<= 3`);
- evaluator agreement: with `judge_repeats` above 1, the widest spread of one criterion's
  repeated scores over the run (`judge_spread`, within 0.1 is consistent) and the number
  of versions whose judgements disagreed; None and 0 when the judge was asked once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reflection.pattern.evaluation import ReflectionEvaluation


@dataclass(frozen=True)
class ReflectionMetrics:
    """What a run achieved, by the seed's success criteria."""

    initial_score: float
    best_score: float
    improvement_per_iteration: list[float] = field(default_factory=list)
    iterations_to_threshold: int | None = None
    judge_spread: float | None = None  # None: no output was judged more than once
    disagreements: int = 0

    @property
    def improvement(self) -> float:
        return round(self.best_score - self.initial_score, 4)

    def as_dict(self) -> dict[str, Any]:
        return {
            "initialScore": round(self.initial_score, 4),
            "bestScore": round(self.best_score, 4),
            "improvement": self.improvement,
            "improvementPerIteration": list(self.improvement_per_iteration),
            "iterationsToThreshold": self.iterations_to_threshold,
            "judgeSpread": self.judge_spread,
            "disagreements": self.disagreements,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReflectionMetrics:
        spread = data.get("judgeSpread")
        return cls(
            initial_score=float(data.get("initialScore", 0.0)),
            best_score=float(data.get("bestScore", 0.0)),
            improvement_per_iteration=[float(x) for x in data.get("improvementPerIteration") or []],
            iterations_to_threshold=data.get("iterationsToThreshold"),
            judge_spread=None if spread is None else float(spread),
            disagreements=int(data.get("disagreements", 0)),
        )


def metrics_of(
    evaluations: Sequence[ReflectionEvaluation], best: ReflectionEvaluation | None
) -> ReflectionMetrics | None:
    """The metrics of a run from its versions' evaluations (all of them, in order, the first
    being iteration 1) and the best version's; None before the first."""
    if not evaluations:
        return None
    scores = [e.overall_score for e in evaluations]
    met = next((i for i, e in enumerate(evaluations, start=1) if e.satisfactory), None)
    spreads = [max(e.judge_spread.values()) for e in evaluations if e.judge_spread]
    return ReflectionMetrics(
        initial_score=scores[0],
        best_score=(best or evaluations[-1]).overall_score,
        improvement_per_iteration=[round(b - a, 4) for a, b in zip(scores, scores[1:], strict=False)],
        iterations_to_threshold=met,
        judge_spread=round(max(spreads), 4) if spreads else None,
        disagreements=sum(e.judge_disagreement for e in evaluations),
    )
