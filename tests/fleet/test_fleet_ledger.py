"""The fleet's budget: a ledger in PostgreSQL that every model call, on any machine, pays into first."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest

from orchestrator.budget import BudgetExceeded, CallBound
from orchestrator.fleet import records
from orchestrator.fleet.ledger import FleetLedger
from orchestrator.fleet.schema import open_database
from orchestrator.metering import MeteredModel
from orchestrator.runlog import RunLog
from reflection.llm import LiteLLMModel
from reflection.meter import Meter
from reflection.scripted import scripted_script

pytestmark = pytest.mark.postgres

CALL = CallBound(tokens=1000, cost=0.01, max_output=500)


def new_run(url: str, max_cost: float | None) -> str:
    with open_database(url) as db:
        return records.create_run(db, "run-1", max_tasks=None, max_hours=None, max_cost=max_cost).id


def run_row(url: str) -> records.Run:
    with open_database(url) as db:
        run = records.get_run(db, "run-1")
    assert run is not None
    return run


def held(url: str) -> float:
    with open_database(url) as db:
        return db.run(lambda conn: conn.execute("SELECT coalesce(sum(cost), 0) FROM goldenloop_holds").fetchone()[0])


def test_reservations_racing_from_many_connections_never_hold_more_than_the_budget(pg_url):
    new_run(pg_url, max_cost=0.25)  # 25 calls' worst case
    granted: list[int] = []
    start = threading.Barrier(8)

    def machine() -> None:
        meter = Meter()
        with open_database(pg_url) as db:  # a connection of its own, as another machine has
            ledger = FleetLedger(db, "run-1", meter, max_cost=0.25, hold_s=600)
            start.wait()
            while ledger.reserve(CALL) is None:
                granted.append(1)

    threads = [threading.Thread(target=machine) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert len(granted) == 25
    assert held(pg_url) == pytest.approx(0.25)


def test_a_released_call_turns_its_hold_into_what_it_really_cost(pg_url):
    new_run(pg_url, max_cost=0.025)
    meter = Meter()
    with open_database(pg_url) as db:
        ledger = FleetLedger(db, "run-1", meter, max_cost=0.025, hold_s=600)
        assert ledger.reserve(CALL) is None and ledger.reserve(CALL) is None
        assert "$0.0200 held by calls in flight" in (ledger.reserve(CALL) or "")  # 0.02 + 0.01 > 0.025
        meter.add_call(100, 50, 0.004)  # the first call came back cheaper than its worst case
        ledger.release(CALL)
        assert ledger.reserve(CALL) is None  # 0.004 spent + 0.01 held + 0.01 fits
        assert ledger.remaining_cost() == pytest.approx(0.025 - 0.004 - 0.02)
    assert run_row(pg_url).spent_cost == pytest.approx(0.004)


def test_an_expired_hold_counts_as_spent_because_its_worker_may_have_been_billed(pg_url):
    new_run(pg_url, max_cost=0.015)
    with open_database(pg_url) as db:
        dying = FleetLedger(db, "run-1", Meter(), max_cost=0.015, hold_s=600)
        dying.hold_s = 0.0  # its worker died mid-call: the hold is past its time at once
        assert dying.reserve(CALL) is None
        other = FleetLedger(db, "run-1", Meter(), max_cost=0.015, hold_s=600)

        reason = other.reserve(CALL)

    assert reason is not None and reason.startswith("fleet cost budget: $0.0100 spent of $0.0150")
    run = run_row(pg_url)
    assert run.spent_cost == pytest.approx(0.01) and run.lost_cost == pytest.approx(0.01)
    assert held(pg_url) == 0


def test_an_unknown_price_is_refused_when_a_cost_budget_is_set(pg_url):
    new_run(pg_url, max_cost=1.0)
    with open_database(pg_url) as db:
        ledger = FleetLedger(db, "run-1", Meter(), max_cost=1.0, hold_s=600)
        assert "price is unknown" in (ledger.reserve(CallBound(1000, None, 500)) or "")
        unpriced = Meter()
        unpriced.add_call(10, 10, None)
        assert "price is unknown" in (FleetLedger(db, "run-1", unpriced, max_cost=1.0, hold_s=600).reason() or "")


PRICING = {"inputCostPerToken": 0.000001, "outputCostPerToken": 0.00001}


@pytest.mark.anyio
async def test_two_machines_calls_in_flight_cannot_together_overspend(pg_url, tmp_path: Path):
    new_run(pg_url, max_cost=0.015)  # one call's worst case (about $0.01), not two
    name = scripted_script([{"reply": "ok", "delay": 0.5, "times": None,
                             "usage": {"inputTokens": 10, "outputTokens": 10}}], pricing=PRICING, dir=tmp_path)
    runlog = RunLog(tmp_path, persist=False)
    results: list[object] = []

    async def machine() -> None:
        meter = Meter()
        with open_database(pg_url) as db:
            ledger = FleetLedger(db, "run-1", meter, max_cost=0.015, hold_s=600)
            model = MeteredModel(LiteLLMModel(name), [meter], runlog, "execute", limits=[ledger], max_output=1000)
            try:
                results.append(await model.complete([{"role": "user", "content": "fix it"}]))
            except BudgetExceeded as exc:
                results.append(exc)

    async with anyio.create_task_group() as group:
        group.start_soon(machine)
        group.start_soon(machine)

    assert len([r for r in results if isinstance(r, BudgetExceeded)]) == 1
    assert run_row(pg_url).spent_cost == pytest.approx(0.00011)  # the one call made, as billed
    assert held(pg_url) == 0
