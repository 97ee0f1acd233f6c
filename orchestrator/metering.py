"""Log, count and pay for every model call, without the callers having to.

`MeteredModel` wraps any ChatModel: every call is logged with its purpose (decompose,
execute, reflect), model, tokens, cost and latency, and added to `Meter`s (the task's,
the run's). With spending limits, each call first reserves its worst case in every
limit's ledger (`orchestrator.budget.SpendLimit`): its prompt's tokens, estimated from
the characters, plus the most its reply may use, at the model's price. A call that a
ledger cannot cover raises `BudgetExceeded` and is never made; after a call the real
cost is counted and the reservation released. A ledger in a database (`Ledger.blocking`)
is asked from a worker thread, so that the event loop keeps serving the other workers
and the queue's heartbeat meanwhile; its release is shielded from cancellation, so that
an interrupted call gives back what it held.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Sequence

import anyio

from orchestrator.budget import BudgetExceeded, CallBound, Ledger
from orchestrator.runlog import RunLog
from reflection.digest import estimate_tokens
from reflection.llm import ChatModel, ChatReply, ModelError, call_cost, max_output_tokens, model_ready
from reflection.meter import Meter

# A reply's ceiling when neither the caller, the config (maxOutputTokens) nor litellm's
# model map says one: then it is asked of the model as max_tokens, so it holds.
DEFAULT_MAX_OUTPUT_TOKENS = 4096
# Tokens a chat format adds around each message (role, separators), on top of its text.
MESSAGE_OVERHEAD_TOKENS = 4


def prompt_tokens(messages: list[dict[str, str]]) -> int:
    """The prompt's tokens as a budget counts them: estimated from its characters."""
    return sum(estimate_tokens(m.get("content") or "") + MESSAGE_OVERHEAD_TOKENS for m in messages)


PROMPTS_KEPT = 32  # recent prompts a new one is compared with for the prefix it repeats


def shared_prefix(messages: list[dict[str, str]], earlier: list[dict[str, str]]) -> int:
    """Characters of `messages` that begin `earlier` as well: the whole messages they share
    in order (same role, same text), then the common start of the first that differs."""
    shared = 0
    for mine, theirs in zip(messages, earlier, strict=False):
        a, b = mine.get("content") or "", theirs.get("content") or ""
        if mine.get("role") != theirs.get("role"):
            break
        if a != b:
            return shared + len(os.path.commonprefix([a, b]))
        shared += len(a)
    return shared


class MeteredModel:
    """A ChatModel that logs, meters and (with limits) pays in advance for every call made through it."""

    def __init__(
        self,
        inner: ChatModel,
        meters: list[Meter],
        runlog: RunLog,
        purpose: str,
        *,
        limits: Sequence[Ledger] = (),
        max_output: int | None = None,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.meters = meters
        self.runlog = runlog
        self.purpose = purpose
        self.limits = [limit for limit in limits if limit.limited]
        self.max_output = max_output  # maxOutputTokens: asked of every call that sets none
        # What a prompt cache could serve of each call: its start that an earlier one sent
        # too (model_call's prefixChars), whatever the provider reports of its own cache.
        self.sent: deque[list[dict[str, str]]] = deque(maxlen=PROMPTS_KEPT)

    async def ready(self) -> None:
        await model_ready(self.inner)

    async def complete(
        self,
        messages: list[dict[str, str]],
        *,
        timeout: float | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatReply:
        prompt_chars = sum(len(m.get("content") or "") for m in messages)
        if max_tokens is None:
            max_tokens = self.max_output
        held: list[Ledger] = []
        bound = None
        if self.limits:
            await self.ready()  # pricing needs litellm; its import is nobody's call
            bound, max_tokens = self.bound(messages, max_tokens)
            for limit in self.limits:
                reason = await _reserve(limit, bound)
                if reason is not None:
                    for other in held:
                        await _release(other, bound)
                    self.runlog.event(
                        "model_call_refused", purpose=self.purpose, model=self.name, reason=reason,
                        promptChars=prompt_chars, maxTokens=max_tokens, worstCostUsd=bound.cost,
                    )
                    raise BudgetExceeded(reason)
                held.append(limit)
        prefix = max((shared_prefix(messages, earlier) for earlier in self.sent), default=0)
        self.sent.append([dict(m) for m in messages])
        try:
            return await self._call(messages, (prompt_chars, prefix), timeout, max_tokens, temperature)
        finally:
            for limit in held:  # the real cost is in the meters by now
                assert bound is not None
                await _release(limit, bound)

    def bound(self, messages: list[dict[str, str]], max_tokens: int | None) -> tuple[CallBound, int | None]:
        """The call's worst case, and the max_tokens to ask for so that the worst case holds."""
        reply_tokens = max_tokens
        if reply_tokens is None:
            reply_tokens = max_output_tokens(self.name)  # the model cannot write more anyway
            if reply_tokens is None:
                reply_tokens = max_tokens = DEFAULT_MAX_OUTPUT_TOKENS
        prompt = prompt_tokens(messages)
        bound = CallBound(prompt + reply_tokens, call_cost(self.name, prompt, reply_tokens), reply_tokens)
        return bound, max_tokens

    async def _call(
        self,
        messages: list[dict[str, str]],
        chars: tuple[int, int],
        timeout: float | None,
        max_tokens: int | None,
        temperature: float | None,
    ) -> ChatReply:
        try:
            reply = await self.inner.complete(messages, timeout=timeout, max_tokens=max_tokens, temperature=temperature)
        except ModelError as exc:
            for meter in self.meters:
                meter.add_error()
            self.runlog.event(
                "model_error",
                purpose=self.purpose,
                model=self.name,
                kind=exc.kind,
                transient=exc.transient,
                message=str(exc),
            )
            raise
        for meter in self.meters:
            meter.add(reply)
        self.runlog.event(
            "model_call",
            purpose=self.purpose,
            model=reply.model,
            promptChars=chars[0],
            prefixChars=chars[1],
            replyChars=len(reply.text),
            inputTokens=reply.input_tokens,
            cachedTokens=reply.cached_tokens,
            outputTokens=reply.output_tokens,
            costUsd=reply.cost_usd,
            costKnown=reply.cost_usd is not None,
            latencyS=round(reply.latency_s, 4),
            finishReason=reply.finish_reason,
            temperature=temperature,
        )
        return reply


async def _reserve(limit: Ledger, bound: CallBound) -> str | None:
    if not limit.blocking:
        return limit.reserve(bound)
    return await anyio.to_thread.run_sync(limit.reserve, bound)


async def _release(limit: Ledger, bound: CallBound) -> None:
    if not limit.blocking:
        limit.release(bound)
        return
    with anyio.CancelScope(shield=True):  # a call cut short still gives back its hold
        await anyio.to_thread.run_sync(limit.release, bound)
