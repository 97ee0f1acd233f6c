"""Revision: which strategy applies a review, and the words that ask the agent for it.

- `full_rewrite`: a new version from a blank page; the current one is shown only as
  what fell short.
- `targeted_edit`: only what the issues name changes; every other line stays.
- `incremental`: the current version is kept as the foundation and extended or repaired
  section by section.
- `hybrid` chooses: `full_rewrite` when the score is below `REWRITE_BELOW` (0.5: the
  draft is more wrong than right), `targeted_edit` when at most `FEW_FAILING` (2)
  criteria are below their threshold, else `incremental`. After a revision made things
  worse, hybrid goes one step further along targeted_edit → incremental → full_rewrite,
  so a failed approach is not simply repeated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from reflection.pattern.criteria import QualityCriterion
from reflection.pattern.evaluation import ReflectionEvaluation
from reflection.redact import redact
from reflection.text import cut_block, one_line

Strategy = Literal["full_rewrite", "targeted_edit", "incremental"]
RevisionStrategy = Literal["full_rewrite", "targeted_edit", "incremental", "hybrid"]
STRATEGIES: tuple[str, ...] = ("full_rewrite", "targeted_edit", "incremental", "hybrid")
ESCALATION: tuple[Strategy, ...] = ("targeted_edit", "incremental", "full_rewrite")
REWRITE_BELOW = 0.5
FEW_FAILING = 2
OUTPUT_CHARS = 12_000
PRIOR_CHARS = 3_000

INSTRUCTIONS: dict[str, str] = {
    "full_rewrite": (
        "Start over. Write a new version of the whole work from a blank page, shaped by the "
        "review so that none of its problems come back. The current version is shown only as "
        "the attempt that fell short: do not patch it."
    ),
    "targeted_edit": (
        "Fix exactly the problems the review names, and nothing else. Every line they do not "
        "concern stays as it is, word for word. Reply with the complete work after the fixes."
    ),
    "incremental": (
        "Keep the current version as the foundation. Fill in what it is missing and repair its "
        "weak sections one at a time, without reorganising the parts that already work. Reply "
        "with the complete, extended work."
    ),
}


def choose_strategy(
    configured: str, evaluation: ReflectionEvaluation, criteria: Sequence[QualityCriterion], *, after_regression: bool
) -> Strategy:
    """The concrete strategy for this revision (`hybrid` decides by the module's rule)."""
    if configured != "hybrid":
        return configured  # type: ignore[return-value]
    thresholds = {c.name: c.threshold for c in criteria}
    failing = [n for n, s in evaluation.criteria_scores.items() if s < thresholds.get(n, 0.0)]
    chosen: Strategy
    if evaluation.overall_score < REWRITE_BELOW:
        chosen = "full_rewrite"
    elif len(failing) <= FEW_FAILING:
        chosen = "targeted_edit"
    else:
        chosen = "incremental"
    if after_regression:
        chosen = ESCALATION[min(ESCALATION.index(chosen) + 1, len(ESCALATION) - 1)]
    return chosen


@dataclass(frozen=True)
class Earlier:
    """An earlier version as a revision prompt may show it."""

    iteration: int
    output: str
    evaluation: ReflectionEvaluation


def revision_prompt(
    strategy: Strategy,
    task: str,
    output: str,
    evaluation: ReflectionEvaluation,
    *,
    iteration: int,
    structured: bool = True,
    earlier: Sequence[Earlier] = (),
    show_reviews: bool = True,
    show_outputs: bool = False,
    tool_results: Sequence[str] = (),
) -> str:
    """The prompt asking for the next version, redacted."""
    parts = [
        f"## The task\n{task or '(not stated)'}",
        f"## The current version (iteration {iteration}, score {evaluation.overall_score:.2f})\n"
        f"{cut_block(output, OUTPUT_CHARS) or '(empty)'}",
        "## The review\n" + (_structured(evaluation) if structured else _prose(evaluation)),
    ]
    if tool_results:
        parts.append("## Tool results\n" + "\n".join(f"- {r}" for r in tool_results))
    if show_reviews and earlier:
        parts.append("## Earlier reviews\n" + "\n".join(_review_line(e) for e in earlier))
    if show_outputs and earlier:
        parts.append("## Earlier versions\n" + "\n\n".join(
            f"### Iteration {e.iteration} (score {e.evaluation.overall_score:.2f})\n{cut_block(e.output, PRIOR_CHARS)}"
            for e in earlier))
    parts.append(f"## What to do ({strategy.replace('_', ' ')})\n{INSTRUCTIONS[strategy]}")
    return redact("\n\n".join(parts))


def _structured(e: ReflectionEvaluation) -> str:
    lines = [f"- {d.name}: {d.score:.2f}" + (f" ({d.reasoning})" if d.reasoning else "") for d in e.details]
    lines += ["Problems:", *(f"- {i}" for i in e.issues or ["(none named)"])]
    if e.suggestions:
        lines += ["Suggestions:", *(f"- {s}" for s in e.suggestions)]
    if e.strengths:
        lines += ["Keep:", *(f"- {s}" for s in e.strengths)]
    return "\n".join(lines)


def _prose(e: ReflectionEvaluation) -> str:
    said = [*e.issues, *e.suggestions]
    return " ".join(s.rstrip(".") + "." for s in said) or "The review named no specific problem."


def _review_line(e: Earlier) -> str:
    issues = "; ".join(e.evaluation.issues) or "no problems named"
    return f"- iteration {e.iteration} (score {e.evaluation.overall_score:.2f}): {one_line(issues, 400)}"
