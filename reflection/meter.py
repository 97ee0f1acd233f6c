"""What model calls cost: calls, tokens and money, counted one way everywhere.

Unknown cost stays unknown: one call without a price makes the total unknown (None),
never $0.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import Protocol


class Billed(Protocol):
    """What one call reports (a ChatReply)."""

    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    cached_tokens: int | None  # None: the provider did not say


# A run's meter is shared by workers that may run on threads of their own: a sum must
# never lose a call (the cost budget is checked against it).
_ADDING = threading.Lock()


@dataclass
class Meter:
    """`calls` counts goldenloop's own model calls and the agent runs; `agent_runs` those
    runs, `requests` the model requests of all calls (one per call of goldenloop's own, what
    an agent reported of its run), `unreported_runs` the agent runs that reported none."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    errors: int = 0
    agent_runs: int = 0
    requests: int = 0
    unreported_runs: int = 0
    # Input tokens a prompt cache served (priced lower by the provider), over the calls
    # whose provider reported its cache; the other calls were priced at the full rate.
    cached_tokens: int = 0
    cache_reported: int = 0

    def add(self, reply: Billed) -> None:
        self.add_call(reply.input_tokens, reply.output_tokens, reply.cost_usd, cached=reply.cached_tokens)

    def add_call(self, input_tokens: int | None, output_tokens: int | None, cost_usd: float | None, *,
                 agent: bool = False, requests: int | None = None, cached: int | None = None) -> None:
        """One model call of goldenloop's own; with `agent`, one agent run of `requests`;
        `cached`: the input tokens its prompt cache served, if the provider said."""
        with _ADDING:
            self._add_call(input_tokens, output_tokens, cost_usd)
            if cached is not None:
                self.cached_tokens += cached
                self.cache_reported += 1
            if not agent:
                self.requests += 1
                return
            self.agent_runs += 1
            self.requests += requests or 0
            self.unreported_runs += requests is None

    def _add_call(self, input_tokens: int | None, output_tokens: int | None, cost_usd: float | None) -> None:
        self.calls += 1
        self.input_tokens += input_tokens or 0
        self.output_tokens += output_tokens or 0
        if self.cost_usd is not None:
            self.cost_usd = None if cost_usd is None else self.cost_usd + cost_usd

    def merge(self, other: Meter) -> None:
        with _ADDING:
            self._merge(other)

    def add_error(self) -> None:
        with _ADDING:
            self.errors += 1

    def _merge(self, other: Meter) -> None:
        for name in _COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        if self.cost_usd is not None:
            self.cost_usd = None if other.cost_usd is None else self.cost_usd + other.cost_usd

    def copy(self) -> Meter:
        return dataclasses.replace(self)

    def since(self, before: Meter) -> Meter:
        """What was counted after `before` was copied (an unknown price stays unknown)."""
        cost = None if self.cost_usd is None or before.cost_usd is None else self.cost_usd - before.cost_usd
        return Meter(cost_usd=cost, **{name: getattr(self, name) - getattr(before, name) for name in _COUNTS})

    def calls_text(self) -> str:
        """"3 model call(s)"; with an agent, its runs and their requests told apart."""
        if not self.agent_runs:
            return f"{self.calls} model call(s)"
        own = self.calls - self.agent_runs
        told, theirs = self.agent_runs - self.unreported_runs, self.requests - own
        said = (f"{theirs} model request(s)" if not self.unreported_runs else
                f"{theirs} model request(s) in the {told} that said" if told else "model requests not reported")
        return f"{self.agent_runs} agent run(s) ({said}), {own} model call(s) of goldenloop's own"

    def tokens_text(self) -> str:
        """"1284 tokens in (900 cached), 88 out": the cached part only where a provider said it."""
        return f"{self.input_tokens} tokens in{self.cache_note()}, {self.output_tokens} out"

    def cache_note(self) -> str:
        """" (900 cached)", " (cache not reported)", or nothing before the first call."""
        if not self.calls:
            return ""
        cached = cached_words(self.cached_or_none)
        if 0 < self.cache_reported < self.requests:
            cached += f" in the {self.cache_reported} call(s) that said"
        return f" ({cached})"

    @property
    def cached_or_none(self) -> int | None:
        """The cached input tokens; None when no call's provider said (priced in full)."""
        return self.cached_tokens if self.cache_reported else None

    def cost_text(self) -> str:
        if self.calls == 0:
            return "$0"
        return "unknown" if self.cost_usd is None else f"${self.cost_usd:.4f}"

    def as_dict(self) -> dict[str, int | float | None]:
        runs = {"agentRuns": self.agent_runs, "modelRequests": self.requests,
                "unreportedRuns": self.unreported_runs} if self.agent_runs else {}
        return {
            "calls": self.calls,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "costUsd": _no_noise(self.cost_usd) if self.calls else 0.0,
            **({"cachedTokens": self.cached_tokens} if self.cache_reported else {}),
            **runs,
        }


_COUNTS = ("calls", "input_tokens", "output_tokens", "errors", "agent_runs", "requests", "unreported_runs",
           "cached_tokens", "cache_reported")


def cached_words(cached: int | None) -> str:
    """"900 cached", or "cache not reported" (None: no provider said, so it was priced in full)."""
    return "cache not reported" if cached is None else f"{cached} cached"


def _no_noise(cost: float | None) -> float | None:
    """A sum of prices without the float noise (0.020000000000000004): nano-dollars are plenty."""
    return None if cost is None else round(cost, 9)
