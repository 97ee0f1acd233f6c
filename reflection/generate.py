"""Make a reflection: ask the model, validate and clamp its reply, fall back to the heuristic.

Model trouble never escapes `generate_reflection`: a timeout, an error, or a reply that
is not the JSON we asked for all end in a heuristic reflection (`source: heuristic`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import anyio

from reflection.classify import classify
from reflection.llm import ChatModel, ChatReply, model_ready
from reflection.prompts import reflection_messages
from reflection.redact import redact, redact_data
from reflection.schema import (
    FailureCategory,
    FailureContext,
    Reflection,
    ReflectionDraft,
    Usage,
)
from reflection.text import extract_json, reason_of

log = logging.getLogger("goldenloop.generate")


# Words models use for our categories, mapped to the contract's values.
CATEGORY_SYNONYMS: dict[str, FailureCategory] = {
    "bug": FailureCategory.ROOT_CAUSE,
    "logic": FailureCategory.ROOT_CAUSE,
    "logic_error": FailureCategory.ROOT_CAUSE,
    "implementation": FailureCategory.ROOT_CAUSE,
    "misunderstanding": FailureCategory.MISCONCEPTION,
    "wrong_assumption": FailureCategory.MISCONCEPTION,
    "api_misuse": FailureCategory.MISCONCEPTION,
    "env": FailureCategory.ENVIRONMENT,
    "dependency": FailureCategory.ENVIRONMENT,
    "setup": FailureCategory.ENVIRONMENT,
    "approach": FailureCategory.APPROACH_ERROR,
    "strategy": FailureCategory.APPROACH_ERROR,
    "design": FailureCategory.APPROACH_ERROR,
    "edge": FailureCategory.EDGE_CASE,
    "boundary": FailureCategory.EDGE_CASE,
    "corner_case": FailureCategory.EDGE_CASE,
    "test": FailureCategory.VERIFICATION,
    "flaky": FailureCategory.VERIFICATION,
    "timeout": FailureCategory.VERIFICATION,
}


def draft_from_reply(obj: dict[str, Any]) -> ReflectionDraft:
    """Validate and clamp a model's JSON; ValueError when it lacks the essentials."""
    analysis = _text(obj.get("analysis"))
    suggestion = _text(obj.get("suggestion"))
    if not analysis or not suggestion:
        raise ValueError("the reply has no analysis or no suggestion")
    return ReflectionDraft.clamped(
        _category(obj.get("category")),
        analysis,
        suggestion,
        _items(obj.get("actionItems", obj.get("action_items"))),
        _confidence(obj.get("confidence")),
    )


def _text(value: Any) -> str:
    # Kept as written: `clamped` redacts it line by line before joining and cutting.
    return value.strip() if isinstance(value, str) else ""


def _category(value: Any) -> FailureCategory:
    key = str(value or "").strip().lower().replace("-", "_").replace(" ", "_")
    try:
        return FailureCategory(key)
    except ValueError:
        pass
    for word, category in CATEGORY_SYNONYMS.items():
        if word in key:
            return category
    return FailureCategory.ROOT_CAUSE


def _items(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    items = [_text(v) for v in value if isinstance(v, str | int | float)]
    return items


def _confidence(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.5
    if number != number:  # NaN
        return 0.5
    if 1.0 < number <= 100.0:  # a percentage
        number /= 100.0
    return min(1.0, max(0.0, number))


async def generate_reflection(
    ctx: FailureContext,
    model: ChatModel | None,
    *,
    timeout_s: float = 30.0,
    previous: Sequence[Reflection] = (),
    template: str | None = None,
) -> Reflection:
    """A reflection on `ctx`: from the model when it answers well, else the heuristic.

    Only a failure of the checks is worth a model's analysis: every other stage (a reply
    not applied, an agent's failed run, an environment, tests weakened, no change, a
    repeat) is explained exactly by its reason, which the heuristic turns into advice.
    """
    # Redacted before anything cuts it (the prompt's diff, the heuristic's quotes): a
    # secret cut in half no longer matches, and its visible half would go through.
    ctx = FailureContext.model_validate(redact_data(ctx.to_dict()))
    if model is None or ctx.stage != "verify":
        return _reflection(ctx, classify(ctx), source="heuristic")
    reply: ChatReply | None = None
    messages = [
        {**m, "content": redact(m["content"])} for m in reflection_messages(ctx, previous, template)
    ]
    try:
        # litellm's first import takes seconds on a loaded machine: it is not the model's
        # slowness, so the reflection's timeout starts once the model is ready.
        await model_ready(model)
        with anyio.fail_after(timeout_s):
            reply = await model.complete(messages, timeout=timeout_s)
        obj = extract_json(reply.text)
        if obj is None:
            raise ValueError("the reply holds no JSON object")
        draft = draft_from_reply(obj)
    except Exception as exc:  # noqa: BLE001 - any model trouble means: use the heuristic
        log.warning("reflection by %s failed (%s); using the heuristic", model.name, reason_of(exc))
        return _reflection(ctx, classify(ctx), source="heuristic", reply=reply)
    if _said_before(draft, previous):
        # A small model asked again tends to write the same reflection word for word; a
        # lesson that did not help the last retry will not help the next one.
        log.info("reflection by %s repeats an earlier one; using the heuristic", model.name)
        return _reflection(ctx, classify(ctx), source="heuristic", reply=reply)
    return _reflection(ctx, draft, source="llm", reply=reply)


def reflection_in_reply(ctx: FailureContext, reply: str | None, *, model: str | None,
                        previous: Sequence[Reflection] = ()) -> Reflection:
    """The reflection on `ctx` that a retry's reply began with (reflexion.oneCall), classified
    as a separate call's would be; the heuristic one when the reply has none, or repeats an
    earlier one. Its tokens are the retry's: no usage of its own."""
    from reflection.in_reply import reflection_part

    ctx = FailureContext.model_validate(redact_data(ctx.to_dict()))
    heuristic = classify(ctx)
    said = reflection_part(reply or "")
    if said is None:
        return _reflection(ctx, heuristic, source="heuristic")
    draft = ReflectionDraft.clamped(heuristic.category, said[0], said[1], [], heuristic.confidence)
    if _said_before(draft, previous):
        return _reflection(ctx, heuristic, source="heuristic")
    return _reflection(ctx, draft, source="llm").model_copy(update={"model": model})


def _said_before(draft: ReflectionDraft, previous: Sequence[Reflection]) -> bool:
    def words(text: str) -> str:
        return " ".join(text.lower().split())

    said = {(words(r.analysis), words(r.suggestion)) for r in previous}
    return (words(draft.analysis), words(draft.suggestion)) in said



def _reflection(
    ctx: FailureContext,
    draft: ReflectionDraft,
    *,
    source: str,
    reply: ChatReply | None = None,
) -> Reflection:
    usage = None
    if reply is not None:  # tokens spent on a malformed reply still count
        usage = Usage(
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            cost_usd=reply.cost_usd,
        )
    return Reflection(
        session_id=ctx.session_id,
        task_id=ctx.task_id,
        subtask_id=ctx.subtask_id,
        attempt_number=ctx.attempt_number,
        category=draft.category,
        # Already redacted: every draft comes from `ReflectionDraft.clamped`.
        analysis=draft.analysis,
        suggestion=draft.suggestion,
        action_items=draft.action_items,
        confidence=draft.confidence,
        failure_type=ctx.failure_type,
        error_signature=ctx.error_signature,
        files_modified=ctx.files_modified or None,
        source=source,  # type: ignore[arg-type]
        model=reply.model if reply is not None else None,
        usage=usage,
    )
