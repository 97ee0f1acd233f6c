"""What model calls cost: calls, tokens and money, counted one way everywhere.

Unknown cost stays unknown: one call without a price makes the total unknown (None),
never $0.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol


class Billed(Protocol):
    """What one call reports (a ChatReply)."""

    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None


# A run's meter is shared by workers that may run on threads of their own: a sum must
# never lose a call (the cost budget is checked against it).
_ADDING = threading.Lock()


@dataclass
class Meter:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    errors: int = 0

    def add(self, reply: Billed) -> None:
        self.add_call(reply.input_tokens, reply.output_tokens, reply.cost_usd)

    def add_call(self, input_tokens: int | None, output_tokens: int | None, cost_usd: float | None) -> None:
        with _ADDING:
            self._add_call(input_tokens, output_tokens, cost_usd)

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
        self.calls += other.calls
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.errors += other.errors
        if self.cost_usd is not None:
            self.cost_usd = None if other.cost_usd is None else self.cost_usd + other.cost_usd

    def copy(self) -> Meter:
        return Meter(self.calls, self.input_tokens, self.output_tokens, self.cost_usd, self.errors)

    def since(self, before: Meter) -> Meter:
        """What was counted after `before` was copied (an unknown price stays unknown)."""
        cost = None if self.cost_usd is None or before.cost_usd is None else self.cost_usd - before.cost_usd
        return Meter(self.calls - before.calls, self.input_tokens - before.input_tokens,
                     self.output_tokens - before.output_tokens, cost, self.errors - before.errors)

    def cost_text(self) -> str:
        if self.calls == 0:
            return "$0"
        return "unknown" if self.cost_usd is None else f"${self.cost_usd:.4f}"

    def as_dict(self) -> dict[str, int | float | None]:
        return {
            "calls": self.calls,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "costUsd": _no_noise(self.cost_usd) if self.calls else 0.0,
        }


def _no_noise(cost: float | None) -> float | None:
    """A sum of prices without the float noise (0.020000000000000004): nano-dollars are plenty."""
    return None if cost is None else round(cost, 9)
