"""A usage limit is not the end of the night: overnight waits until it resets and goes on
with the same task, counting no attempt and keeping no lesson; past the deadline it stops
there, the task open. The model is the scripted provider answering 429 with a Retry-After,
as a provider's usage window does (a minute is the line: shorter waits are retried within
the call, so the test moves that line to a second)."""

from __future__ import annotations

from pathlib import Path

import pytest
from projects import FIX_ADD, events_of, make_project, outcome_lines, tasks_on_disk

from orchestrator.cli import overnight_main


@pytest.fixture
def windows_of_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("reflection.llm._MAX_RETRY_AFTER_S", 1.0)


def limited_then_fixed(repo: Path, retry_after: float) -> Path:
    replies = [{"match": "Task T-1:", "error": "rate_limit", "retryAfter": retry_after},
               {"match": "Task T-1:", "reply": FIX_ADD}]
    return make_project(repo, replies, config={"reflexion": {"useLLM": False}})


def test_overnight_waits_for_the_limit_to_reset_then_closes_the_same_task(
    git_repo: Path, windows_of_a_second: None, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = limited_then_fixed(git_repo, retry_after=2)

    assert overnight_main([str(repo), "--max-tasks", "1"]) == 0  # the limited try is not counted

    out = capsys.readouterr().out
    assert "waiting for the usage limit to reset:" in out and "then T-1 again" in out
    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert [e["attempt"] for e in events_of(repo, "verdict")] == [1]  # no attempt spent on the limit
    assert outcome_lines(repo) == []  # nor a lesson


def test_a_limit_that_resets_after_the_deadline_stops_the_run_with_the_task_open(
    git_repo: Path, windows_of_a_second: None, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = limited_then_fixed(git_repo, retry_after=3600)

    assert overnight_main([str(repo), "--max-hours", "0.5"]) == 1

    out = capsys.readouterr().out
    assert "a usage limit that resets at" in out and "after the run's time budget ends" in out
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"
    assert events_of(repo, "verdict") == [] and outcome_lines(repo) == []
