"""The fleet's morning summary, from records alone: each repository's block says why that
repository stopped, not why the fleet did."""

from __future__ import annotations

from datetime import UTC, datetime

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
