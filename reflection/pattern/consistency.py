"""Repeated judging: the same output judged n times, so the judge's consistency is measured.

The seed asks that one output receive similar scores across evaluations (within 0.1).
With `judgements` above 1 the model judge is asked that many times, concurrently, at the
same temperature (0) as a single judgement: what varies is what a real score would vary
by. The scores are averaged per criterion; the spread (highest minus lowest) of each
criterion is kept, and a spread above `JUDGE_TOLERANCE` (0.1) is a disagreement. The
lists (issues, suggestions, strengths) are the first answer's. Judgements that fail are
left out; when all fail, the judge failed, as for one call.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio

from reflection.llm import ChatModel
from reflection.pattern.criteria import QualityCriterion
from reflection.pattern.evaluation import JUDGE_TOLERANCE, CriterionScore
from reflection.pattern.judge import Judged, judge_with_model
from reflection.pattern.run import add_usage
from reflection.schema import Usage

log = logging.getLogger("goldenloop.judge")

@dataclass(frozen=True)
class Repeated:
    """The judgements merged: averaged scores, the spread per criterion and their cost."""

    judged: Judged | None  # None: every judgement failed
    answered: int  # how many judgements came back
    spread: dict[str, float] = field(default_factory=dict)  # criterion -> highest minus lowest score
    usage: Usage = field(default_factory=Usage)


async def judge_repeatedly(
    model: ChatModel,
    criteria: Sequence[QualityCriterion],
    output: str,
    *,
    times: int,
    task: str = "",
    template: str | None = None,
    timeout_s: float = 60.0,
) -> Repeated:
    """`times` judgements of `output`, merged (see the module)."""
    answers: list[Judged | None] = [None] * times

    async def one(index: int) -> None:
        answers[index] = await judge_with_model(model, criteria, output, task=task, template=template,
                                                timeout_s=timeout_s)

    async with anyio.create_task_group() as group:
        for index in range(times):
            group.start_soon(one, index)
    good = [a for a in answers if a is not None]
    if not good:
        return Repeated(None, 0)
    usage = Usage()
    for answer in good:
        if answer.reply is not None:
            r = answer.reply
            usage = add_usage(usage, Usage(input_tokens=r.input_tokens, output_tokens=r.output_tokens,
                                           cost_usd=r.cost_usd))
    merged, spread = _merged(good, criteria)
    if any(s > JUDGE_TOLERANCE for s in spread.values()):
        log.warning("the judge disagreed with itself by up to %.2f over %d judgements of one output",
                    max(spread.values()), len(good))
    return Repeated(merged, len(good), spread, usage)


def _merged(answers: list[Judged], criteria: Sequence[QualityCriterion]) -> tuple[Judged, dict[str, float]]:
    """Each criterion's mean score (with the first answer's reason) and its spread."""
    first = answers[0]
    scores: list[CriterionScore] = []
    spread: dict[str, float] = {}
    for c in criteria:
        given = [s for a in answers for s in a.scores if s.name == c.name]
        if not given:
            continue
        values = [s.score for s in given]
        scores.append(CriterionScore(c.name, statistics.fmean(values), given[0].reasoning))
        if len(values) > 1:
            spread[c.name] = round(max(values) - min(values), 4)
    confidence = statistics.fmean(a.confidence for a in answers)
    return Judged(scores, first.issues, first.suggestions, first.strengths, confidence, first.reply), spread
