"""Spending limits checked before every attempt.

The next attempt is estimated from the attempts so far (what they spent on average,
reflections included) and refused when it would cross the limit. Money that cannot be
counted is not spent: with a cost limit set, an unknown price stops the work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reflection.meter import Meter

Check = Callable[[], str | None]


@dataclass
class SpendLimit:
    meter: Meter
    max_cost: float | None = None
    max_tokens: int | None = None
    scope: str = "task"  # named in the reason: "task" or "run"
    price_known: bool = True
    attempts: int = 0  # attempts allowed so far

    def before_attempt(self) -> str | None:
        """A reason to stop, or None (and the attempt is counted)."""
        reason = self.reason()
        if reason is None:
            self.attempts += 1
        return reason

    def reason(self) -> str | None:
        """Why the next attempt would overspend, without counting it; None if it would not."""
        return self._cost_reason() or self._token_reason()

    def _cost_reason(self) -> str | None:
        if self.max_cost is None:
            return None
        spent = self.meter.cost_usd if self.price_known else None
        if spent is None:
            return (
                f"{self.scope} cost budget: the model's price is unknown, so spending cannot be "
                "counted; refusing to spend"
            )
        estimate = spent / self.attempts if self.attempts else 0.0
        if spent + estimate > self.max_cost:
            return (
                f"{self.scope} cost budget: ${spent:.4f} spent of ${self.max_cost:.4f}; the next "
                f"attempt is estimated at ${estimate:.4f}"
            )
        return None

    def _token_reason(self) -> str | None:
        if self.max_tokens is None:
            return None
        used = self.meter.input_tokens + self.meter.output_tokens
        estimate = used / self.attempts if self.attempts else 0.0
        if used + estimate > self.max_tokens:
            return (
                f"{self.scope} token budget: {used} of {self.max_tokens} tokens used; the next "
                f"attempt is estimated at {estimate:.0f}"
            )
        return None


def combine(*checks: Check | None) -> Check | None:
    """One check that asks each in turn; the first reason wins."""
    present = [c for c in checks if c is not None]
    if not present:
        return None

    def check() -> str | None:
        return next((r for r in (c() for c in present) if r), None)

    return check
