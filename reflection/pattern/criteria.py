"""Quality criteria: what an output is scored on, how heavily, and by which evaluator.

A criterion names its evaluator: `llm` (a model judge, or the heuristic without one),
`regex` (a pattern that must, or must not, match), `function` (a callable returning a
score or a verdict) or `command` (a program run in a folder, scored by its exit code or by
a number it prints, such as a coverage percentage). Default sets follow the task type;
`REVIEW_CRITERIA` are the reflect skill's four weighted criteria (seed ADR-013).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

EvaluatorKind = Literal["llm", "regex", "function", "command"]
TaskType = Literal["code_generation", "writing", "analysis", "reasoning", "review"]


@dataclass(frozen=True)
class QualityCriterion:
    """One thing an output is judged on; `weight` is relative, `threshold` the minimum."""

    name: str
    description: str = ""
    weight: float = 1.0
    threshold: float = 0.7
    evaluator: EvaluatorKind = "llm"
    evaluator_config: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ValueError("a quality criterion needs a name")
        if self.weight < 0:
            raise ValueError(f"criterion {self.name!r}: weight must not be negative")
        if not 0.0 <= self.threshold <= 1.0:
            raise ValueError(f"criterion {self.name!r}: threshold must be within 0..1")
        if not self.description:
            object.__setattr__(self, "description", _DESCRIPTIONS.get(self.name, self.name.replace("_", " ")))


_DESCRIPTIONS = {
    "correctness": "Does the output do what was asked, without bugs?",
    "efficiency": "Does it avoid needless work in time and memory?",
    "readability": "Is it easy to read: clear names, simple structure?",
    "edge_cases": "Are empty, boundary and invalid inputs handled?",
    "clarity": "Is every sentence easy to understand?",
    "coherence": "Do the parts follow from one another?",
    "completeness": "Is everything asked for covered?",
    "tone": "Does the tone suit the reader?",
    "accuracy": "Are the facts and figures right?",
    "depth": "Does it go beyond the obvious?",
    "relevance": "Does everything serve the question?",
    "objectivity": "Are claims supported rather than asserted?",
    "logical_validity": "Does each step follow from the ones before it?",
    "task_completion": "Was the primary task completed successfully?",
    "code_quality": "Is the code well-structured, readable, and maintainable?",
    "error_handling": "Were errors handled gracefully with informative messages?",
    "test_coverage": "Were appropriate tests added or updated?",
}


def _equal(*names: str) -> tuple[QualityCriterion, ...]:
    return tuple(QualityCriterion(name) for name in names)


REVIEW_CRITERIA: tuple[QualityCriterion, ...] = (
    QualityCriterion("task_completion", weight=0.4),
    QualityCriterion("code_quality", weight=0.3),
    QualityCriterion("error_handling", weight=0.15),
    QualityCriterion("test_coverage", weight=0.15),
)

DEFAULT_CRITERIA: dict[str, tuple[QualityCriterion, ...]] = {
    "code_generation": _equal("correctness", "efficiency", "readability", "edge_cases"),
    "writing": _equal("clarity", "coherence", "completeness", "tone"),
    "analysis": _equal("accuracy", "depth", "relevance", "objectivity"),
    "reasoning": _equal("logical_validity", "completeness", "clarity"),
    "review": REVIEW_CRITERIA,
}


def criteria_for(task_type: str) -> tuple[QualityCriterion, ...]:
    """The default criteria of a task type; ValueError naming the known types otherwise."""
    try:
        return DEFAULT_CRITERIA[task_type]
    except KeyError:
        known = ", ".join(sorted(DEFAULT_CRITERIA))
        raise ValueError(f"unknown task type {task_type!r}; known: {known}") from None


def criteria_named(names: Iterable[str], *, weights: Mapping[str, float] | None = None) -> tuple[QualityCriterion, ...]:
    """Criteria by name (the review defaults' weights where they have one, else 1.0)."""
    known = {c.name: c for c in REVIEW_CRITERIA}
    picked = []
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        criterion = known.get(name) or QualityCriterion(name)
        if weights and name in weights:
            criterion = replace(criterion, weight=weights[name])
        picked.append(criterion)
    if not picked:
        raise ValueError("no criteria named")
    return tuple(picked)
