"""The spending ledger around real model calls (the scripted model, through litellm).

The command-line tests (tests/batch/test_overnight.py, tests/checks/test_retry_intelligence.py)
show the limits end to end; these pin down what one ledger does when calls overlap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from orchestrator.budget import BudgetExceeded, SpendLimit
from orchestrator.metering import MeteredModel
from orchestrator.runlog import RunLog
from reflection.llm import ChatReply, LiteLLMModel
from reflection.meter import Meter
from reflection.scripted import scripted_script

PRICING = {"inputCostPerToken": 0.000001, "outputCostPerToken": 0.00001}
USAGE = {"inputTokens": 10, "outputTokens": 10}  # $0.00011 a call
ASK = [{"role": "user", "content": "fix it"}]


def models(
    tmp_path: Path, ledger: SpendLimit, count: int, delay: float = 0.0
) -> tuple[list[MeteredModel], list[dict[str, Any]]]:
    name = scripted_script(
        [{"reply": "ok", "delay": delay, "times": None, "usage": USAGE}], pricing=PRICING, dir=tmp_path
    )
    runlog, events = RunLog(tmp_path, persist=False), []
    runlog.subscribe(events.append)
    # A reply may use 1000 tokens: each call reserves about $0.01 before it is made.
    made = [
        MeteredModel(LiteLLMModel(name), [ledger.meter], runlog, "execute", limits=[ledger], max_output=1000)
        for _ in range(count)
    ]
    return made, events


@pytest.mark.anyio
async def test_calls_in_flight_hold_their_worst_case_so_overlapping_calls_cannot_overspend(tmp_path):
    ledger = SpendLimit(Meter(), max_cost=0.015, scope="run")  # one call's worst case, not two
    both, events = models(tmp_path, ledger, 2, delay=0.5)  # the first is in flight when the second asks
    results: list[ChatReply | BudgetExceeded] = []

    async def call(model: MeteredModel) -> None:
        try:
            results.append(await model.complete(ASK))
        except BudgetExceeded as exc:
            results.append(exc)

    async with anyio.create_task_group() as group:
        for model in both:
            group.start_soon(call, model)

    refused = [r for r in results if isinstance(r, BudgetExceeded)]
    assert len(results) == 2 and len(refused) == 1
    assert "held by calls in flight" in str(refused[0])
    assert ledger.meter.calls == 1 and ledger.meter.cost_usd == pytest.approx(0.00011)
    assert ledger.reserved_cost == 0 and ledger.reserved_tokens == 0  # all given back
    assert [e["event"] for e in events] == ["model_call_refused", "model_call"]


@pytest.mark.anyio
async def test_once_the_call_is_paid_its_unused_reservation_is_free_again(tmp_path):
    ledger = SpendLimit(Meter(), max_cost=0.015, scope="run")
    (model,), _ = models(tmp_path, ledger, 1)

    for _ in range(3):  # each call holds $0.01 while it runs but spends $0.00011
        await model.complete(ASK)

    assert ledger.meter.calls == 3 and ledger.meter.cost_usd == pytest.approx(0.00033)
    assert ledger.reserved_cost == 0


@pytest.mark.anyio
async def test_a_token_limit_reserves_the_prompt_and_the_reply_ceiling(tmp_path):
    ledger = SpendLimit(Meter(), max_tokens=1000, scope="task")
    (model,), events = models(tmp_path, ledger, 1)

    with pytest.raises(BudgetExceeded, match=r"task token budget: 0 of 1000 tokens used; .* up to 1006 "):
        await model.complete(ASK)  # "fix it": 2 tokens + 4 for the message + 1000 for the reply

    assert ledger.meter.calls == 0 and [e["event"] for e in events] == ["model_call_refused"]
