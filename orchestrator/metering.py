"""Log and count every model call, without the callers having to.

`MeteredModel` wraps any ChatModel: every call is logged with its purpose (decompose,
execute, reflect), model, tokens, cost and latency, and added to `Meter`s (the task's,
the run's).
"""

from __future__ import annotations

from orchestrator.runlog import RunLog
from reflection.llm import ChatModel, ChatReply, ModelError
from reflection.meter import Meter


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
