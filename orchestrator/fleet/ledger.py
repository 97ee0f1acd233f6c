"""One budget for the fleet: a run's cost ledger in PostgreSQL that every model call pays into.

`FleetLedger` is a `orchestrator.budget.Ledger`, so it goes wherever a `SpendLimit` goes
(a MeteredModel's limits, the loop's check before each attempt, an agent's budget flag).
It keeps no money of its own: the run's row holds what was spent, and
`goldenloop_holds` what calls in flight may still spend.

- `reserve`, before a call: one transaction locks the run's row, adds what this process
  spent since it last said so, charges as spent the holds that expired (their worker
  died mid-call, or took far longer than any call may: it may have been billed, so the
  worst is assumed), and inserts a hold for the call's worst case only if everything
  spent, everything held and this call still fit the limit. Machines never overspend
  together because each decision is made on the locked row.
- `release`, after it: one transaction deletes the hold and adds what the call cost, as
  the process's meter counted it, to the run and to the job's outcome row (so a job
  whose worker died still shows what it spent). Pushing the meter's difference rather than the reply's
  cost also counts what a coding agent reported through the meter since.
- A hold expires after the call's longest possible time (timeout times attempts, plus a
  margin). A hold that expired and was charged is not charged again by its release: the
  real cost is added on top, erring towards spending less, never more.

The price must be known when a cost limit is set: money that cannot be counted is not
spent (as `SpendLimit` refuses it).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from orchestrator.budget import CallBound
from reflection.meter import Meter
from reflection.postgres.connection import Database

if TYPE_CHECKING:
    import psycopg

_SLACK = 1e-12  # float rounding: a call that exactly fits the limit fits
HOLD_MARGIN_S = 60.0


@dataclass
class _Totals:
    spent: float
    held: float
    max_cost: float | None


class FleetLedger:
    """The run's cost budget as one process sees it: its meter, its holds, the shared row."""

    blocking: ClassVar[bool] = True

    def __init__(self, db: Database, run_id: str, meter: Meter, *, max_cost: float | None, hold_s: float,
                 worker: str = "", row_id: int | None = None) -> None:
        self.db = db
        self.run_id = run_id
        self.row_id = row_id  # the job's outcome row: its cost follows every push, so a lost job's shows
        self.meter = meter  # what this process spent: the job's run meter
        self.max_cost = max_cost
        self.hold_s = hold_s + HOLD_MARGIN_S
        self.worker = worker
        self.pushed = 0.0  # of meter.cost_usd, already added to the run's spent_cost
        self.attempts = 0
        self.largest_call: CallBound | None = None
        self._holds: dict[int, list[int]] = {}  # id(call) -> hold ids (one per reserve)
        self._lock = threading.Lock()  # reserve and release may come from several threads

    @property
    def limited(self) -> bool:
        return self.max_cost is not None

    # -- around each model call -----------------------------------------------------

    def reserve(self, call: CallBound) -> str | None:
        if self.max_cost is None:
            return None
        with self._lock:
            if self.largest_call is None or (call.cost or 0.0) > (self.largest_call.cost or 0.0):
                self.largest_call = call
            delta = self._unpushed()
            if delta is None or call.cost is None:
                return _unknown_price()
            cost = call.cost
            hold, totals = self.db.transaction(lambda conn: self._reserve(conn, delta, cost))
            self.pushed += delta
            if hold is None:
                return (f"fleet cost budget: ${totals.spent:.4f} spent of ${self.max_cost:.4f}{_held(totals.held)}; "
                        f"the next model call may cost up to ${cost:.4f} ({call.words})")
            self._holds.setdefault(id(call), []).append(hold)
            return None

    def _reserve(self, conn: psycopg.Connection, delta: float, cost: float) -> tuple[int | None, _Totals]:
        totals = self._charge(conn, delta)
        if totals.max_cost is not None and totals.spent + totals.held + cost > totals.max_cost + _SLACK:
            return None, totals
        row = conn.execute(
            "INSERT INTO goldenloop_holds (run_id, cost, worker, expires_at)"
            " VALUES (%s, %s, %s, now() + make_interval(secs => %s)) RETURNING id",
            (self.run_id, cost, self.worker, self.hold_s),
        ).fetchone()
        assert row is not None
        return int(row[0]), totals

    def _charge(self, conn: psycopg.Connection, delta: float) -> _Totals:
        """Lock the run's row, add `delta` and the expired holds to what was spent; the totals."""
        found = conn.execute("SELECT max_cost FROM goldenloop_runs WHERE id = %s FOR UPDATE", (self.run_id,)).fetchone()
        if found is None:
            raise LookupError(f"run {self.run_id} is not in the database")
        expired = conn.execute(
            "WITH gone AS (DELETE FROM goldenloop_holds WHERE run_id = %s AND expires_at <= now() RETURNING cost)"
            " SELECT coalesce(sum(cost), 0) FROM gone", (self.run_id,),
        ).fetchone()[0]  # type: ignore[index]
        spent = conn.execute(
            "UPDATE goldenloop_runs SET spent_cost = spent_cost + %s, lost_cost = lost_cost + %s WHERE id = %s"
            " RETURNING spent_cost", (delta + expired, expired, self.run_id),
        ).fetchone()[0]  # type: ignore[index]
        held = conn.execute("SELECT coalesce(sum(cost), 0) FROM goldenloop_holds WHERE run_id = %s",
                            (self.run_id,)).fetchone()[0]  # type: ignore[index]
        self._follow(conn, delta)
        return _Totals(float(spent), float(held), found[0])

    def _follow(self, conn: psycopg.Connection, delta: float) -> None:
        if self.row_id is not None and delta:
            m = self.meter
            conn.execute("UPDATE goldenloop_outcomes SET cost = coalesce(cost, 0) + %s, calls = %s, input_tokens = %s,"
                         " output_tokens = %s, cached_tokens = %s, cache_reported = %s WHERE id = %s",
                         (delta, m.calls, m.input_tokens, m.output_tokens, m.cached_tokens, m.cache_reported,
                          self.row_id))

    def release(self, call: CallBound) -> None:
        with self._lock:
            ids = self._holds.get(id(call))
            hold = ids.pop() if ids else None
            if ids == []:
                del self._holds[id(call)]
            delta = self._unpushed() or 0.0

            def work(conn: psycopg.Connection) -> None:
                if hold is not None:
                    conn.execute("DELETE FROM goldenloop_holds WHERE id = %s", (hold,))
                if delta:
                    conn.execute("UPDATE goldenloop_runs SET spent_cost = spent_cost + %s WHERE id = %s",
                                 (delta, self.run_id))
                    self._follow(conn, delta)

            self.db.transaction(work)
            self.pushed += delta

    # -- before each attempt, and at the end ----------------------------------------

    def before_attempt(self) -> str | None:
        reason = self.reason()
        if reason is None:
            self.attempts += 1
        return reason

    def reason(self) -> str | None:
        """Why the next attempt would overspend the fleet's budget; None if it would not."""
        if self.max_cost is None:
            return None
        with self._lock:
            delta = self._unpushed()
            if delta is None:
                return _unknown_price()
            totals = self._push(delta)
        spent_here = self.meter.cost_usd or 0.0
        average = spent_here / self.attempts if self.attempts else 0.0
        largest = self.largest_call.cost if self.largest_call and self.largest_call.cost is not None else 0.0
        estimate = max(average, largest)
        if totals.spent + totals.held + estimate > self.max_cost + _SLACK:
            return (f"fleet cost budget: ${totals.spent:.4f} spent of ${self.max_cost:.4f}{_held(totals.held)}; "
                    f"the next attempt is estimated at ${estimate:.4f}")
        return None

    def remaining_cost(self) -> float | None:
        """What the fleet may still spend: the limit less what was spent and what is held."""
        if self.max_cost is None:
            return None
        with self._lock:
            delta = self._unpushed()
            if delta is None:
                return None
            totals = self._push(delta)
        return self.max_cost - totals.spent - totals.held

    def flush(self) -> None:
        """Add what this process spent since it last said so (a job's end)."""
        with self._lock:
            delta = self._unpushed()
            if delta:
                self._push(delta)

    def _push(self, delta: float) -> _Totals:
        totals = self.db.transaction(lambda conn: self._charge(conn, delta))
        self.pushed += delta
        return totals

    def _unpushed(self) -> float | None:
        """What the meter counted since the last push; None when its cost is unknown."""
        spent = self.meter.cost_usd if self.meter.calls else 0.0
        return None if spent is None else spent - self.pushed


def _held(held: float) -> str:
    return f" and ${held:.4f} held by calls in flight" if held else ""


def _unknown_price() -> str:
    return "fleet cost budget: the model's price is unknown, so spending cannot be counted; refusing to spend"
