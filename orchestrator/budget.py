"""Spending limits as hard limits: the ledger that every model call reserves from.

A `SpendLimit` is one ledger (a task's, or the whole run's, shared by parallel workers):
what has been spent (its `Meter`) and what calls in flight have reserved. Before every
model call, `orchestrator.metering.MeteredModel` reserves the call's worst case (its
prompt's tokens, estimated from the characters, plus its `max_tokens`, at the model's
price); a call the ledger cannot cover is refused (`BudgetExceeded`) and never made.
After the call the reservation is released and the real cost counted.

Before each attempt the loop also asks `before_attempt`: the next attempt is estimated
as the larger of what the attempts so far cost on average (reflections included) and
the worst case of the largest model call asked for so far, and refused when it would
cross the limit, so that no attempt starts that the budget cannot cover.

Money that cannot be counted is not spent: with a cost limit set, an unknown price stops
the work.

`Ledger` is what metering, the loop and an agent's budget flag ask of a limit; a
`SpendLimit` is one in this process, `orchestrator.fleet.ledger.FleetLedger` one that a
fleet of machines shares in PostgreSQL (`blocking`: its calls wait on a network, so
metering makes them off the event loop).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, Protocol

from reflection.meter import Meter

Check = Callable[[], str | None]
_SLACK = 1e-12  # float rounding: a call that exactly fits the limit fits


class BudgetExceeded(Exception):
    """A model call that a spending limit cannot cover; `str()` is the reason. The call
    was not made; the work stops like a budget stop before an attempt."""


@dataclass(frozen=True)
class CallBound:
    """The worst case of one model call: every token it may use, and their price."""

    tokens: int  # prompt tokens (estimated) + the most the reply may use
    cost: float | None  # None: the model's price is unknown
    max_output: int = 0  # the reply's part of `tokens`, for the reason's wording

    @property
    def words(self) -> str:
        return f"{self.tokens - self.max_output} prompt + {self.max_output} reply tokens"


class Ledger(Protocol):
    """A spending limit as its users see it (see the module's docstring)."""

    blocking: ClassVar[bool]  # True: each call may wait on a network (run it off the event loop)

    @property
    def limited(self) -> bool: ...

    def before_attempt(self) -> str | None: ...

    def reason(self) -> str | None: ...

    def reserve(self, call: CallBound) -> str | None: ...

    def release(self, call: CallBound) -> None: ...

    def remaining_cost(self) -> float | None: ...


@dataclass
class SpendLimit:
    blocking: ClassVar[bool] = False
    meter: Meter
    max_cost: float | None = None
    max_tokens: int | None = None
    scope: str = "task"  # named in the reason: "task" or "run"
    price_known: bool = True
    attempts: int = 0  # attempts allowed so far
    reserved_cost: float = 0.0  # held by model calls in flight
    reserved_tokens: int = 0
    largest_call: CallBound | None = None  # the largest call asked for so far
    _lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    @property
    def limited(self) -> bool:
        return self.max_cost is not None or self.max_tokens is not None

    # -- before each attempt --------------------------------------------------------

    def before_attempt(self) -> str | None:
        """A reason to stop, or None (and the attempt is counted)."""
        with self._lock:
            reason = self.reason()
            if reason is None:
                self.attempts += 1
            return reason

    def reason(self) -> str | None:
        """Why the next attempt would overspend, without counting it; None if it would not."""
        with self._lock:
            return self._cost_reason() or self._token_reason()

    def _cost_reason(self) -> str | None:
        if self.max_cost is None:
            return None
        spent = self.meter.cost_usd if self.price_known else None
        if spent is None:
            return self._unknown_price()
        average = spent / self.attempts if self.attempts else 0.0
        largest = self.largest_call.cost if self.largest_call and self.largest_call.cost is not None else 0.0
        estimate = max(average, largest)
        if spent + self.reserved_cost + estimate > self.max_cost + _SLACK:
            return (
                f"{self.scope} cost budget: ${spent:.4f} spent of ${self.max_cost:.4f}{self._held_cost()}; "
                f"the next attempt is estimated at ${estimate:.4f}"
            )
        return None

    def _token_reason(self) -> str | None:
        if self.max_tokens is None:
            return None
        used = self._used_tokens()
        average = used / self.attempts if self.attempts else 0.0
        estimate = max(average, float(self.largest_call.tokens if self.largest_call else 0))
        if used + self.reserved_tokens + estimate > self.max_tokens:
            return (
                f"{self.scope} token budget: {used} of {self.max_tokens} tokens used{self._held_tokens()}; "
                f"the next attempt is estimated at {estimate:.0f}"
            )
        return None

    # -- around each model call -----------------------------------------------------

    def reserve(self, call: CallBound) -> str | None:
        """Hold `call`'s worst case, or say why the ledger cannot cover it (nothing held)."""
        with self._lock:
            if self.largest_call is None or (call.cost or 0.0, call.tokens) > (
                self.largest_call.cost or 0.0,
                self.largest_call.tokens,
            ):
                self.largest_call = call
            reason = self._call_cost_reason(call) or self._call_token_reason(call)
            if reason is None:
                self.reserved_cost += call.cost or 0.0
                self.reserved_tokens += call.tokens
            return reason

    def release(self, call: CallBound) -> None:
        """Give back what `reserve(call)` held; its real cost is in the meter by now."""
        with self._lock:
            self.reserved_cost = max(self.reserved_cost - (call.cost or 0.0), 0.0)
            self.reserved_tokens = max(self.reserved_tokens - call.tokens, 0)

    def _call_cost_reason(self, call: CallBound) -> str | None:
        if self.max_cost is None:
            return None
        spent = self.meter.cost_usd if self.price_known else None
        if spent is None or call.cost is None:
            return self._unknown_price()
        if spent + self.reserved_cost + call.cost > self.max_cost + _SLACK:
            return (
                f"{self.scope} cost budget: ${spent:.4f} spent of ${self.max_cost:.4f}{self._held_cost()}; "
                f"the next model call may cost up to ${call.cost:.4f} ({call.words})"
            )
        return None

    def _call_token_reason(self, call: CallBound) -> str | None:
        if self.max_tokens is None:
            return None
        used = self._used_tokens()
        if used + self.reserved_tokens + call.tokens > self.max_tokens:
            return (
                f"{self.scope} token budget: {used} of {self.max_tokens} tokens used{self._held_tokens()}; "
                f"the next model call may use up to {call.tokens} ({call.words})"
            )
        return None

    def remaining_cost(self) -> float | None:
        """The cost budget left now, what calls in flight hold deducted; None without a cost
        limit, or when spending cannot be counted (`before_attempt` refuses then)."""
        with self._lock:
            spent = self.meter.cost_usd if self.price_known else None
            if spent is None or self.max_cost is None:
                return None
            return self.max_cost - spent - self.reserved_cost

    # -- wording --------------------------------------------------------------------

    def _used_tokens(self) -> int:
        return self.meter.input_tokens + self.meter.output_tokens

    def _held_cost(self) -> str:
        return f" and ${self.reserved_cost:.4f} held by calls in flight" if self.reserved_cost else ""

    def _held_tokens(self) -> str:
        return f" and {self.reserved_tokens} held by calls in flight" if self.reserved_tokens else ""

    def _unknown_price(self) -> str:
        return (
            f"{self.scope} cost budget: the model's price is unknown, so spending cannot be "
            "counted; refusing to spend"
        )


def combine(*checks: Check | None) -> Check | None:
    """One check that asks each in turn; the first reason wins."""
    present = [c for c in checks if c is not None]
    if not present:
        return None

    def check() -> str | None:
        return next((r for r in (c() for c in present) if r), None)

    return check
