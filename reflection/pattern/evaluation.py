"""An evaluation: per-criterion scores with their reasoning, and the weighted whole."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from reflection.pattern.criteria import QualityCriterion

# The seed's "same output, similar scores (within 0.1)": repeated judgements of one
# criterion that spread wider disagree.
JUDGE_TOLERANCE = 0.1


@dataclass(frozen=True)
class CriterionScore:
    """One criterion's score in 0..1 and why; `evaluator` says who gave it."""

    name: str
    score: float
    reasoning: str = ""
    evaluator: str = "llm"

    def __post_init__(self) -> None:
        object.__setattr__(self, "score", min(1.0, max(0.0, float(self.score))))

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "score": round(self.score, 4), "reasoning": self.reasoning, "evaluator": self.evaluator}


@dataclass(frozen=True)
class ReflectionEvaluation:
    """What a reflection found: the weighted score, each criterion's, issues and suggestions."""

    overall_score: float
    criteria_scores: dict[str, float]
    satisfactory: bool
    issues: list[str] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)
    confidence: float = 0.5
    details: list[CriterionScore] = field(default_factory=list)  # the reasoning per criterion
    strengths: list[str] = field(default_factory=list)
    judgements: int = 1  # how many times the model judge scored this output (judge_repeats)
    judge_spread: dict[str, float] = field(default_factory=dict)  # criterion -> highest minus lowest score

    @property
    def judge_disagreement(self) -> bool:
        """Repeated judgements of one criterion differed by more than JUDGE_TOLERANCE."""
        return any(s > JUDGE_TOLERANCE for s in self.judge_spread.values())

    def as_dict(self) -> dict[str, object]:
        repeated = {"judgements": self.judgements, "judgeSpread": dict(self.judge_spread),
                    "judgeDisagreement": self.judge_disagreement} if self.judgements > 1 else {}
        return {
            "overallScore": round(self.overall_score, 4),
            "criteriaScores": {k: round(v, 4) for k, v in self.criteria_scores.items()},
            "satisfactory": self.satisfactory,
            "issues": list(self.issues),
            "suggestions": list(self.suggestions),
            "strengths": list(self.strengths),
            "confidence": round(self.confidence, 4),
            "details": [d.as_dict() for d in self.details],
            **repeated,
        }


def weighted_score(scores: Sequence[CriterionScore], criteria: Sequence[QualityCriterion]) -> float:
    """The weighted mean over the criteria that were scored; 0.0 when none was."""
    by_name = {s.name: s.score for s in scores}
    total = sum(c.weight for c in criteria if c.name in by_name)
    if total <= 0:
        return 0.0
    return sum(c.weight * by_name[c.name] for c in criteria if c.name in by_name) / total


def evaluation_of(
    scores: Sequence[CriterionScore],
    criteria: Sequence[QualityCriterion],
    threshold: float,
    *,
    issues: Sequence[str] = (),
    suggestions: Sequence[str] = (),
    strengths: Sequence[str] = (),
    confidence: float = 0.5,
) -> ReflectionEvaluation:
    """Scores made into an evaluation: satisfactory when the weighted score reaches
    `threshold` and no criterion is below its own threshold. A criterion under its
    threshold with nothing said about it becomes an issue naming it."""
    overall = weighted_score(scores, criteria)
    thresholds = {c.name: c.threshold for c in criteria}
    below = [s for s in scores if s.score < thresholds.get(s.name, 0.0)]
    found = list(issues) or [f"{s.name}: {s.reasoning or 'below its threshold'}" for s in below]
    return ReflectionEvaluation(
        overall_score=overall,
        criteria_scores={s.name: s.score for s in scores},
        satisfactory=overall >= threshold and not below,
        issues=found,
        suggestions=list(suggestions),
        confidence=confidence,
        details=list(scores),
        strengths=list(strengths),
    )
