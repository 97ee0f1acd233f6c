"""The fleet's morning summary, from records alone: each repository's block says why that
repository stopped, not why the fleet did."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from orchestrator.fleet.backlog import Backlog, LeftOpen
from orchestrator.fleet.records import Run, RunRepository
from orchestrator.fleet.report import FleetReport


def test_a_repository_with_nothing_left_open_says_its_backlog_is_empty_while_another_has_blocked_tasks():
    run = Run("20261124T220000Z-3fa2c1", datetime.now(UTC), None, None, None, 2, 0.0, 0.0)
    beta, gamma = RunRepository("file:///r/beta.git", "beta-1a", "main"), RunRepository("file:///r/gamma.git",
                                                                                         "gamma-2b", "main")
    backlogs = [Backlog(beta.repo, beta.repo_key, "main", [LeftOpen("B-3", "Break", "blocked", "blocked: escalated"),
                                                           LeftOpen("B-4", "Use", "open", "waits on B-3 (blocked)")]),
                Backlog(gamma.repo, gamma.repo_key, "main", [])]

    summary = FleetReport(run, [], {"succeeded": 2}, [beta, gamma], backlogs).summary()

    assert summary["stopReason"] == "no task left ready: 2 not closed, blocked or waiting on a task that is not closed"
    by_name = {b["repository"]: b for b in summary["repositories"]}
    assert by_name[beta.repo]["stopReason"] == summary["stopReason"]
    assert by_name[gamma.repo]["stopReason"] == "backlog empty" and by_name[gamma.repo]["notClosed"] == []


@pytest.mark.postgres
def test_the_morning_summary_says_what_a_prompt_cache_served_and_where_none_was_reported(pg_url):
    from orchestrator.fleet import records
    from orchestrator.fleet.schema import open_database
    from orchestrator.loop.outcome import TaskOutcome
    from reflection.meter import Meter

    with open_database(pg_url) as db:
        run = records.create_run(db, "run-cache", max_tasks=None, max_hours=None, max_cost=None)
        for task, cached in (("T-1", 900), ("T-2", None)):
            row, _ = records.claim(db, records.Job(run.id, None, "file:///r/a.git", "a-1", task, "w1"))
            meter = Meter()
            meter.add_call(1000, 100, 0.001, cached=cached)
            records.finish(db, row, TaskOutcome(task, "closed", "", meter=meter))
        rows = records.outcomes(db, run.id)

    report = FleetReport(run, rows, {"succeeded": 2})
    assert report.summary()["totals"]["cachedTokens"] == 900
    page = report.page()
    # Each task's row says its own; the night's total says what the calls that reported said.
    assert "1000 tokens in (900 cached), 100 out" in page and "1000 tokens in (cache not reported), 100 out" in page
    assert "2000 tokens in (900 cached in the 1 call(s) that said), 200 out" in page
