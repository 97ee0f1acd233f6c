"""Reflection history: every version of an output, how it scored, and which one is best.

Generic on purpose: the Reflection pattern stores its drafts here and the golden loop its
attempts, each caller keeping its own fields in `extra`. JSON keys are camelCase; keys
this version does not know are kept in `extra` and written back unchanged.

Best-version rules (`select_best`):

- `highest_score`: the highest overall score; ties go to the latest version.
- `latest`: the most recent version.
- `first_satisfactory`: the first version whose evaluation was satisfactory; when none
  was, `highest_score`.
- `weighted_recency`: the highest `score + RECENCY_WEIGHT * position`, where `position`
  runs from 0 (the first version) to 1 (the latest): a later version wins over an
  earlier one that scored at most `RECENCY_WEIGHT` (0.1) more. Ties go to the latest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from reflection.pattern.evaluation import CriterionScore, ReflectionEvaluation
from reflection.pattern.metrics import ReflectionMetrics
from reflection.schema import Usage

SelectionRule = Literal["highest_score", "latest", "first_satisfactory", "weighted_recency"]
SELECTION_RULES: tuple[str, ...] = ("highest_score", "latest", "first_satisfactory", "weighted_recency")
RECENCY_WEIGHT = 0.1  # of score a version gains from being the latest rather than the first

Valued = Callable[[int, "ReflectionVersion"], float]  # (index, version) -> how good


@dataclass(frozen=True)
class ReflectionVersion:
    """One version of an output and its evaluation."""

    iteration: int
    output: str
    evaluation: ReflectionEvaluation
    improvements_applied: list[str] = field(default_factory=list)  # what its revision was asked to fix
    timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))
    token_usage: Usage = field(default_factory=Usage)
    extra: dict[str, Any] = field(default_factory=dict)  # callers' own fields, camelCase on disk

    @property
    def score(self) -> float:
        return self.evaluation.overall_score

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.extra,
            "iteration": self.iteration,
            "output": self.output,
            "evaluation": self.evaluation.as_dict(),
            "improvementsApplied": list(self.improvements_applied),
            "timestamp": self.timestamp.isoformat(),
            "tokenUsage": self.token_usage.model_dump(mode="json", by_alias=True),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReflectionVersion:
        known = {"iteration", "output", "evaluation", "improvementsApplied", "timestamp", "tokenUsage"}
        return cls(
            iteration=int(data["iteration"]),
            output=str(data.get("output", "")),
            evaluation=evaluation_from_dict(data.get("evaluation") or {}),
            improvements_applied=[str(i) for i in data.get("improvementsApplied") or []],
            timestamp=datetime.fromisoformat(data["timestamp"]) if data.get("timestamp") else datetime.now(UTC),
            token_usage=Usage.model_validate(data.get("tokenUsage") or {}),
            extra={k: v for k, v in data.items() if k not in known},
        )


def evaluation_from_dict(data: Mapping[str, Any]) -> ReflectionEvaluation:
    """The inverse of `ReflectionEvaluation.as_dict`."""
    return ReflectionEvaluation(
        overall_score=float(data.get("overallScore", 0.0)),
        criteria_scores={str(k): float(v) for k, v in (data.get("criteriaScores") or {}).items()},
        satisfactory=bool(data.get("satisfactory", False)),
        issues=list(data.get("issues") or []),
        suggestions=list(data.get("suggestions") or []),
        confidence=float(data.get("confidence", 0.5)),
        details=[
            CriterionScore(d["name"], d.get("score", 0.0), d.get("reasoning", ""), d.get("evaluator", "llm"))
            for d in data.get("details") or []
        ],
        strengths=list(data.get("strengths") or []),
        judgements=int(data.get("judgements", 1)),
        judge_spread={str(k): float(v) for k, v in (data.get("judgeSpread") or {}).items()},
    )


@dataclass(frozen=True)
class ReflectionHistory:
    """The versions of one run, the best and the last, and why iterating stopped."""

    versions: list[ReflectionVersion]
    best_version: ReflectionVersion | None
    final_version: ReflectionVersion | None
    convergence_reason: str | None
    total_iterations: int
    extra: dict[str, Any] = field(default_factory=dict)
    metrics: ReflectionMetrics | None = None  # the seed's success metrics (a pattern's run)

    def as_dict(self) -> dict[str, Any]:
        measured = {"metrics": self.metrics.as_dict()} if self.metrics else {}
        return {
            **self.extra,
            **measured,
            "versions": [v.as_dict() for v in self.versions],
            "bestVersion": self.best_version.iteration if self.best_version else None,
            "finalVersion": self.final_version.iteration if self.final_version else None,
            "convergenceReason": self.convergence_reason,
            "totalIterations": self.total_iterations,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReflectionHistory:
        """Best and final are stored as iterations; versions not kept resolve to None."""
        known = {"versions", "bestVersion", "finalVersion", "convergenceReason", "totalIterations", "metrics"}
        versions = [ReflectionVersion.from_dict(v) for v in data.get("versions") or []]
        by_iteration = {v.iteration: v for v in versions}
        return cls(
            versions=versions,
            best_version=by_iteration.get(data.get("bestVersion")),  # type: ignore[arg-type]
            final_version=by_iteration.get(data.get("finalVersion")),  # type: ignore[arg-type]
            convergence_reason=data.get("convergenceReason"),
            total_iterations=int(data.get("totalIterations", len(versions))),
            extra={k: v for k, v in data.items() if k not in known},
            metrics=ReflectionMetrics.from_dict(data["metrics"]) if data.get("metrics") else None,
        )


def select_best(versions: Sequence[ReflectionVersion], rule: str = "highest_score") -> ReflectionVersion | None:
    """The version a rule picks (see the module's doc); None when there is none."""
    if rule not in SELECTION_RULES:
        raise ValueError(f"unknown best-version rule {rule!r}; known: {', '.join(SELECTION_RULES)}")
    if not versions:
        return None
    if rule == "latest":
        return versions[-1]
    if rule == "first_satisfactory":
        first = next((v for v in versions if v.evaluation.satisfactory), None)
        return first or select_best(versions, "highest_score")
    if rule == "weighted_recency":
        return _latest_max(versions, _recency_weighted(len(versions)))
    return _latest_max(versions, lambda _i, v: v.score)


def _recency_weighted(count: int) -> Valued:
    def value(index: int, version: ReflectionVersion) -> float:
        position = index / (count - 1) if count > 1 else 1.0
        return version.score + RECENCY_WEIGHT * position

    return value


def _latest_max(versions: Sequence[ReflectionVersion], value: Valued) -> ReflectionVersion:
    """The version of the highest value; ties go to the later one."""
    best_index = max(range(len(versions)), key=lambda i: (value(i, versions[i]), i))
    return versions[best_index]
