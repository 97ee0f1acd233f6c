"""The Reflection pattern: generate, reflect against quality criteria, revise (docs/PATTERN.md).

Cheap to import: each name's module is loaded when first asked for (a loop that only
tracks convergence loads nothing else), and no model client library until a model is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reflection.exports import lazy_exports

if TYPE_CHECKING:
    from reflection.pattern.agent import Agent, AgentOutput, AgentStep, CallableAgent, ModelAgent, ToolResult, as_agent
    from reflection.pattern.convergence import (
        ConvergenceReason,
        ConvergenceSettings,
        ConvergenceTracker,
        Decision,
        Step,
    )
    from reflection.pattern.criteria import (
        DEFAULT_CRITERIA,
        REVIEW_CRITERIA,
        QualityCriterion,
        criteria_for,
        criteria_named,
    )
    from reflection.pattern.evaluation import CriterionScore, ReflectionEvaluation, evaluation_of, weighted_score
    from reflection.pattern.evaluators import Evaluated, evaluate
    from reflection.pattern.history import ReflectionHistory, ReflectionVersion, select_best
    from reflection.pattern.metrics import ReflectionMetrics, metrics_of
    from reflection.pattern.pattern import (
        AgentError,
        ReflectionCallbacks,
        ReflectionDecision,
        ReflectionPattern,
        ReflectionResult,
    )
    from reflection.pattern.revision import choose_strategy, revision_prompt
    from reflection.pattern.triggers import TRIGGERS, TriggerSettings

_HOMES = {
    **dict.fromkeys(
        ("Agent", "AgentOutput", "AgentStep", "CallableAgent", "ModelAgent", "ToolResult", "as_agent"),
        "reflection.pattern.agent",
    ),
    **dict.fromkeys(
        ("ConvergenceReason", "ConvergenceSettings", "ConvergenceTracker", "Decision", "Step"),
        "reflection.pattern.convergence",
    ),
    **dict.fromkeys(
        ("DEFAULT_CRITERIA", "REVIEW_CRITERIA", "QualityCriterion", "criteria_for", "criteria_named"),
        "reflection.pattern.criteria",
    ),
    **dict.fromkeys(
        ("CriterionScore", "ReflectionEvaluation", "evaluation_of", "weighted_score"), "reflection.pattern.evaluation"
    ),
    **dict.fromkeys(("Evaluated", "evaluate"), "reflection.pattern.evaluators"),
    **dict.fromkeys(("ReflectionHistory", "ReflectionVersion", "select_best"), "reflection.pattern.history"),
    **dict.fromkeys(("ReflectionMetrics", "metrics_of"), "reflection.pattern.metrics"),
    **dict.fromkeys(
        ("AgentError", "ReflectionCallbacks", "ReflectionDecision", "ReflectionPattern", "ReflectionResult"),
        "reflection.pattern.pattern",
    ),
    **dict.fromkeys(("choose_strategy", "revision_prompt"), "reflection.pattern.revision"),
    **dict.fromkeys(("TRIGGERS", "TriggerSettings"), "reflection.pattern.triggers"),
}

__getattr__ = lazy_exports(__name__, _HOMES)

__all__ = [
    "DEFAULT_CRITERIA",
    "REVIEW_CRITERIA",
    "TRIGGERS",
    "Agent",
    "AgentError",
    "AgentOutput",
    "AgentStep",
    "CallableAgent",
    "ConvergenceReason",
    "ConvergenceSettings",
    "ConvergenceTracker",
    "CriterionScore",
    "Decision",
    "Evaluated",
    "ModelAgent",
    "QualityCriterion",
    "ReflectionCallbacks",
    "ReflectionDecision",
    "ReflectionEvaluation",
    "ReflectionHistory",
    "ReflectionMetrics",
    "ReflectionPattern",
    "ReflectionResult",
    "ReflectionVersion",
    "Step",
    "ToolResult",
    "TriggerSettings",
    "as_agent",
    "choose_strategy",
    "criteria_for",
    "criteria_named",
    "evaluate",
    "evaluation_of",
    "metrics_of",
    "revision_prompt",
    "select_best",
    "weighted_score",
]
