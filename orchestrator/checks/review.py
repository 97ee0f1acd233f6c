"""The review gate: a passing attempt scored on weighted criteria before it is committed.

Passing the checks says the code works; the review says whether it is good enough to
keep (seeds 002 and 003). Each configured criterion is judged by what fits it: a command
the project names (a linter, a coverage run), scored by its exit code or by the number
it prints; otherwise the review model, which scores every such criterion in one call
with a reason each; and where there is no model, or it fails, the diff heuristic
(review_heuristic.py). The result is a `ReflectionEvaluation` of the Reflection pattern,
with the improvements a revision attempt is asked to make.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.checks.review_heuristic import DiffSigns, heuristic_scores, improvements_of
from orchestrator.checks.verify import run_command
from orchestrator.config import ReviewConfig
from reflection.llm import ChatModel, ChatReply
from reflection.pattern.criteria import QualityCriterion
from reflection.pattern.evaluation import CriterionScore, ReflectionEvaluation, evaluation_of
from reflection.pattern.judge import judge_with_model
from reflection.text import shorten

HEURISTIC_CONFIDENCE = 0.3
_CANNOT_RUN = (126, 127)  # POSIX shells: not executable / not found
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Review:
    """A review's evaluation, what a revision should improve, and the judge's reply."""

    evaluation: ReflectionEvaluation
    improvements: list[str]
    source: str  # "llm", "heuristic", "command" or a mix joined by "+"
    reply: ChatReply | None = None
    below: list[str] = field(default_factory=list)  # criteria under their own threshold
    problems: list[str] = field(default_factory=list)  # criteria that could not be scored, and why

    @property
    def score(self) -> float:
        return self.evaluation.overall_score

    def as_event(self) -> dict[str, object]:
        e = self.evaluation
        return {"score": round(e.overall_score, 4), "satisfactory": e.satisfactory, "source": self.source,
                "criteria": [d.as_dict() for d in e.details], "improvements": self.improvements,
                "below": self.below, "problems": self.problems}


def criteria_of(settings: ReviewConfig) -> list[QualityCriterion]:
    return [
        QualityCriterion(c.name, c.description or "", weight=c.weight, threshold=c.threshold,
                         evaluator="command" if c.command else "llm",
                         evaluator_config={"command": c.command, "score_pattern": c.score_pattern} if c.command else {})
        for c in settings.criteria
    ]


class ReviewGate:
    """Scores passing attempts of one project; built once per loop."""

    def __init__(self, settings: ReviewConfig, root: Path, *, model: ChatModel | None, template: str | None,
                 timeout_s: float, command_timeout_s: float) -> None:
        self.settings, self.root = settings, root
        self.model = model if settings.use_llm else None
        self.template = template
        self.timeout_s, self.command_timeout_s = timeout_s, command_timeout_s
        self.criteria = criteria_of(settings)

    async def review(self, *, task: str, diff: str, tests_touched: bool, waived: bool) -> Review:
        commands = [c for c in self.criteria if c.evaluator == "command"]
        judged = [c for c in self.criteria if c.evaluator == "llm"]
        scores: dict[str, CriterionScore] = {}
        problems: list[str] = []
        for criterion in commands:
            scored = await self._command(criterion)
            if isinstance(scored, str):  # a setup problem, not the attempt's: left out of the score
                problems.append(scored)
            else:
                scores[criterion.name] = scored
        reply, sources = None, {"command"} if commands else set()
        issues: list[str] = []
        suggestions: list[str] = []
        strengths: list[str] = []
        confidence = HEURISTIC_CONFIDENCE
        if judged and self.model is not None:
            verdict = await judge_with_model(self.model, judged, diff, task=task, template=self.template,
                                             timeout_s=self.timeout_s)
            if verdict is not None:
                scores.update({s.name: s for s in verdict.scores})
                issues, suggestions, strengths = verdict.issues, verdict.suggestions, verdict.strengths
                reply, confidence = verdict.reply, verdict.confidence
                sources.add("llm")
        missing = [c for c in judged if c.name not in scores]
        if missing:
            signs = DiffSigns.of(diff, tests_touched=tests_touched)
            scores.update({s.name: s for s in heuristic_scores(missing, signs, waived=waived)})
            sources.add("heuristic")
        ordered = [scores[c.name] for c in self.criteria if c.name in scores]
        improvements = suggestions or improvements_of(ordered, self.criteria)
        evaluation = evaluation_of(ordered, self.criteria, self.settings.success_threshold, issues=issues,
                                   suggestions=improvements, strengths=strengths, confidence=confidence)
        thresholds = {c.name: c.threshold for c in self.criteria}
        below = [s.name for s in ordered if s.score < thresholds[s.name]]
        return Review(evaluation, improvements, "+".join(sorted(sources)), reply, below, problems)

    async def _command(self, criterion: QualityCriterion) -> CriterionScore | str:
        """The criterion's score from its command, or why the command cannot score anything."""
        config = criterion.evaluator_config
        result = await run_command(str(config["command"]), self.root, timeout_s=self.command_timeout_s)
        name, command = criterion.name, shorten(str(config["command"]), 60)
        if not result.started or result.exit_code in _CANNOT_RUN:
            return (f"criterion {name}: `{command}` cannot run here (exit {result.exit_code}: not found or not "
                    "executable); it is left out of the score: install it or fix review.criteria")
        if result.timed_out:
            return CriterionScore(name, 0.0, f"`{command}` did not finish", evaluator="command")
        pattern = config.get("score_pattern")
        if pattern:
            found = re.search(str(pattern), result.output)
            number = _number(found.group(1) if found and found.groups() else found.group(0) if found else "")
            if number is None:
                return CriterionScore(name, 0.0, f"`{command}` printed no score matching its scorePattern",
                                      evaluator="command")
            return CriterionScore(name, number, f"`{command}` scored {number:.2f}", evaluator="command")
        if result.exit_code == 0:
            return CriterionScore(name, 1.0, f"`{command}` passed", evaluator="command")
        tail = shorten(result.output.strip().splitlines()[-1], 120) if result.output.strip() else ""
        return CriterionScore(name, 0.0, f"`{command}` exited {result.exit_code}: {tail}".rstrip(": "),
                              evaluator="command")


def _number(text: str) -> float | None:
    """A percentage or a 0..1 score from a command's output."""
    found = _NUMBER.search(text or "")
    if found is None:
        return None
    value = float(found.group(0))
    return min(1.0, value / 100.0 if value > 1.0 else value)


def review_block(review: Review, threshold: float) -> Sequence[str]:
    """The lines of the revision prompt that say what the review found."""
    e = review.evaluation
    lines = [f"Review score {e.overall_score:.2f} (needs {threshold:.2f}):"]
    lines += [f"- {d.name}: {d.score:.2f} — {d.reasoning}" for d in e.details]
    if review.improvements:
        lines.append("Improve:")
        lines += [f"- {item}" for item in review.improvements]
    return lines
