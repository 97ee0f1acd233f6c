"""The model judge: one call scores an output on every `llm` criterion, with reasons.

The prompt is a template a project may replace (`review.prompt`); its placeholders are
`{task}`, `{criteria}` and `{output}`, checked by `template_problem`. The JSON shape of
the reply is always appended, because the answer is read as that JSON. Everything sent
is redacted first. Any trouble (an error, a timeout, no JSON, a criterion left out)
gives None for what was not scored, so the caller falls back to its heuristic.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from reflection.generate import extract_json
from reflection.llm import ChatModel, ChatReply, model_ready
from reflection.pattern.criteria import QualityCriterion
from reflection.pattern.evaluation import CriterionScore
from reflection.redact import redact
from reflection.text import cut_block, reason_of, reply_items, reply_text
from reflection.text import template_problem as placeholder_problem

log = logging.getLogger("goldenloop.judge")

OUTPUT_CHARS = 12_000  # of the output shown: enough to judge a change, not a whole tree
PLACEHOLDERS = ("task", "criteria", "output")
MAX_ITEMS = 5
_NO_REASON = {"", "one sentence", "n/a", "none", "no issue", "..."}
# Placeholders, not findings: "none" and the reply shape's own example texts, copied.
_NOTHING = {"", "none", "no issues", "n/a", "nothing", "...", "no suggestions", "what is wrong or missing",
            "what a revision should change", "what is already good", "each problem you found, one sentence each"}

SYSTEM = (
    "You are a strict reviewer. You score work against named criteria, each from 0.0 "
    "(absent or wrong) to 1.0 (nothing to improve), and say why in one sentence per "
    "criterion. Reply with one JSON object and nothing else."
)

DEFAULT_TEMPLATE = """## The task
{task}

## The criteria
{criteria}

## The work to judge
{output}

Score the work on each criterion. Name concrete issues (a file, a function, a missing
case) and suggestions that a revision can act on; name what is already good."""


def reply_shape(criteria: Sequence[QualityCriterion]) -> str:
    # Issues before scores, so the scores follow from what was found; and one line per
    # criterion with its name filled in: a small model copies the example's shape, and
    # with a single example entry it scored the first criterion only.
    # Score before reasoning: Qwen2.5-Coder 1.5B, given reasoning first, wrote good reasons
    # and then left every score out.
    rows = ",\n    ".join(f'{{"name": "{c.name}", "score": 0.0, "reasoning": "one sentence"}}' for c in criteria)
    return f"""Reply with exactly this JSON object:
{{
  "issues": ["each problem you found, one sentence each"],
  "suggestions": ["what a revision should change"],
  "strengths": ["what is already good"],
  "scores": [
    {rows}
  ],
  "confidence": 0.0
}}
Every score is between 0.0 and 1.0: 1.0 only when the criterion has no issue at all. At
most {MAX_ITEMS} issues, suggestions and strengths; an empty list when there are none."""


def template_problem(template: str) -> str | None:
    """What makes a judge prompt template unusable, as a phrase; None if nothing."""
    return placeholder_problem(template, PLACEHOLDERS, required="output", required_is="the work to judge")


def judge_messages(
    criteria: Sequence[QualityCriterion], output: str, *, task: str = "", template: str | None = None
) -> list[dict[str, str]]:
    """The chat messages asking a model to score `output`, redacted."""
    # No weights shown: the weighting is ours, and a small model copied them as its scores.
    listed = "\n".join(f"- {c.name}: {c.description}" for c in criteria)
    question = (template or DEFAULT_TEMPLATE).format(
        task=task or "(not stated)", criteria=listed, output=cut_block(output, OUTPUT_CHARS) or "(empty)"
    )
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": redact(f"{question}\n\n{reply_shape(criteria)}")},
    ]


@dataclass(frozen=True)
class Judged:
    """What the judge said: the criteria it scored, its lists, and the call's reply."""

    scores: list[CriterionScore]
    issues: list[str] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)
    strengths: list[str] = field(default_factory=list)
    confidence: float = 0.5
    reply: ChatReply | None = None


async def judge_with_model(
    model: ChatModel,
    criteria: Sequence[QualityCriterion],
    output: str,
    *,
    task: str = "",
    template: str | None = None,
    timeout_s: float = 60.0,
) -> Judged | None:
    """Scores for the criteria the model named (others are left out); None on any trouble."""
    if not criteria:
        return Judged(scores=[])
    reply: ChatReply | None = None
    try:
        await model_ready(model)  # litellm's first import is not the model's slowness
        with anyio.fail_after(timeout_s):
            reply = await model.complete(judge_messages(criteria, output, task=task, template=template),
                                         timeout=timeout_s, temperature=0.0)
        obj = extract_json(reply.text)
        if obj is None:
            raise ValueError("the reply holds no JSON object")
        return judged_from_reply(obj, criteria, reply)
    except Exception as exc:  # noqa: BLE001 - a judge that fails leaves the heuristic to score
        log.warning("judging by %s failed (%s); its criteria are scored without it", model.name, reason_of(exc))
        return None


def judged_from_reply(obj: dict[str, Any], criteria: Sequence[QualityCriterion], reply: ChatReply | None) -> Judged:
    """The scores of known criteria in a reply; ValueError when it scored none of them."""
    scores: dict[str, CriterionScore] = {}
    for name, item in _scored_items(obj, {c.name for c in criteria}):
        score = _score(item.get("score"))
        reasoning = reply_text(item.get("reasoning") or item.get("reason"))
        # A score without a reason of its own is no judgement: a small model fills the
        # shape's placeholder ("one sentence") and a uniform score. The caller's
        # heuristic scores that criterion instead.
        if score is not None and reasoning.lower().strip(".") not in _NO_REASON:
            scores[name] = CriterionScore(name, score, redact(reasoning)[:300])
    if not scores:
        raise ValueError("the reply scored none of the criteria")
    return Judged(
        scores=[scores[c.name] for c in criteria if c.name in scores],
        issues=_items(obj.get("issues")),
        suggestions=_items(obj.get("suggestions")),
        strengths=_items(obj.get("strengths")),
        confidence=_score(obj.get("confidence")) or 0.5,
        reply=reply,
    )


def _scored_items(obj: dict[str, Any], wanted: set[str]) -> list[tuple[str, dict[str, Any]]]:
    """(name, {score, reasoning}) pairs from the shape asked for, or from the flat map
    `{"code_quality": 0.7}` / `{"code_quality": {"score": 0.7, ...}}` small models write."""
    listed = obj.get("scores")
    if isinstance(listed, list):
        return [(i["name"], i) for i in listed if isinstance(i, dict) and i.get("name") in wanted]
    source = listed if isinstance(listed, dict) else obj
    return [(name, v if isinstance(v, dict) else {"score": v}) for name, v in source.items() if name in wanted]


def _score(value: Any) -> float | None:
    """A score read leniently: 0..1, a mark out of 10 ("7/10" too), or a percentage."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    if isinstance(value, str):
        value = value.strip().removesuffix("%")
        top, slash, bottom = value.partition("/")
        if slash:
            try:
                return min(1.0, max(0.0, float(top) / float(bottom)))
            except (ValueError, ZeroDivisionError):
                return None
    try:
        number = float(value)
    except ValueError:
        return None
    if number != number or number < 0:  # NaN or negative
        return None
    if number > 10.0:
        number /= 100.0
    elif number > 1.0:
        number /= 10.0
    return min(1.0, number)


def _items(value: Any) -> list[str]:
    kept = [redact(v)[:300] for v in reply_items(value) if v.lower().strip(".") not in _NOTHING]
    return kept[:MAX_ITEMS]

