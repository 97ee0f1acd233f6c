"""Count what model calls cost, and log each one, without the callers having to.

`MeteredModel` wraps any ChatModel: every call is logged with its purpose (decompose,
execute, reflect), model, tokens, cost and latency, and added to a `Meter`. Unknown
cost stays unknown: one call without a price makes the total unknown.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.runlog import RunLog
from reflection.llm import ChatModel, ChatReply, ModelError


@dataclass
class Meter:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    errors: int = 0

    def add(self, reply: ChatReply) -> None:
        self.calls += 1
        self.input_tokens += reply.input_tokens or 0
        self.output_tokens += reply.output_tokens or 0
        if self.cost_usd is not None:
            self.cost_usd = None if reply.cost_usd is None else self.cost_usd + reply.cost_usd

    def merge(self, other: Meter) -> None:
        self.calls += other.calls
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.errors += other.errors
        if self.cost_usd is not None:
            self.cost_usd = None if other.cost_usd is None else self.cost_usd + other.cost_usd

    def cost_text(self) -> str:
        if self.calls == 0:
            return "$0"
        return "unknown" if self.cost_usd is None else f"${self.cost_usd:.4f}"

    def as_dict(self) -> dict[str, int | float | None]:
        return {
            "calls": self.calls,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "costUsd": self.cost_usd if self.calls else 0.0,
        }


class MeteredModel:
    """A ChatModel that logs and meters every call made through it."""

    def __init__(self, inner: ChatModel, meters: list[Meter], runlog: RunLog, purpose: str):
        self.inner = inner
        self.name = inner.name
        self.meters = meters
        self.runlog = runlog
        self.purpose = purpose

    async def complete(
        self,
        messages: list[dict[str, str]],
        *,
        timeout: float | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatReply:
        prompt_chars = sum(len(m.get("content") or "") for m in messages)
        try:
            reply = await self.inner.complete(messages, timeout=timeout, max_tokens=max_tokens, temperature=temperature)
        except ModelError as exc:
            for meter in self.meters:
                meter.errors += 1
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
            promptChars=prompt_chars,
            replyChars=len(reply.text),
            inputTokens=reply.input_tokens,
            outputTokens=reply.output_tokens,
            costUsd=reply.cost_usd,
            costKnown=reply.cost_usd is not None,
            latencyS=round(reply.latency_s, 4),
            finishReason=reply.finish_reason,
            temperature=temperature,
        )
        return reply
