"""What every real agent's tests share: a project that runs the agent, its transcript,
and the look of a task the environment stopped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from programs import program
from projects import CALC, do_one_task, events_of, git, make_project, tasks_on_disk


def agent_project(repo: Path, kind: str, timeout_s: float = 300, config: dict[str, Any] | None = None,
                  **executor: Any) -> Path:
    """calc.py with its failing test, driven by the installed agent `kind`, one retry;
    `config` is laid over project.json's settings (None for a key: left unset)."""
    settings = {"executor": {"kind": kind, "program": str(program(kind)), "timeoutSeconds": timeout_s, **executor},
                "reflexion": {"useLLM": False, "maxRetries": 1}}
    for key, value in (config or {}).items():
        settings[key] = {**settings[key], **value} if isinstance(settings.get(key), dict) else value
    return make_project(repo, [], config=settings)


def transcript(repo: Path, attempt: int = 1) -> str:
    """The transcript kept beside the attempt in history/."""
    (path,) = (repo / ".openagents" / "history" / "T-1").glob(f"*.attempt-{attempt}.transcript.txt")
    return path.read_text()


def environment_stop(repo: Path, capsys: pytest.CaptureFixture[str], said: str, argv_words: tuple[str, ...]) -> str:
    """The task is blocked after one agent run that counted no model call, the agent's own
    words (`said`) shown, its command line not."""
    assert do_one_task(repo) == 1
    assert tasks_on_disk(repo)["T-1"]["status"] == "blocked"
    assert len(events_of(repo, "agent_run")) == 1 and events_of(repo, "model_call") == []
    out = capsys.readouterr().out
    assert said in out
    assert not any(word in out for word in argv_words)
    return out


def nothing_done_blocks(repo: Path) -> None:
    """An agent that ends its run as done without a change: the checks judge the untouched
    tree once, the retry's same (empty) change is counted without another test run, and
    the task is blocked, never closed."""
    assert do_one_task(repo) == 1
    (verdict,) = events_of(repo, "verdict")
    assert (verdict["outcome"], verdict["filesChanged"]) == ("failed", [])
    assert [e["action"] for e in events_of(repo, "repeat")][-1] == "counted as a failed attempt"
    blocked = tasks_on_disk(repo)["T-1"]
    assert blocked["status"] == "blocked"
    assert blocked["closeReason"].startswith("2 test(s) this task is about still fail, so it is not done")
    assert (repo / "calc.py").read_text() == CALC


def closed_with_one_commit(repo: Path, fixed: str) -> None:
    """The run closed the task with one commit of calc.py, which now reads `fixed`, and
    left the tree clean."""
    assert do_one_task(repo) == 0
    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    (sha,) = tasks_on_disk(repo)["T-1"]["commits"]
    assert git(repo, "show", "--name-only", "--format=", sha).split() == ["calc.py"]
    assert (repo / "calc.py").read_text() == fixed and git(repo, "status", "--porcelain") == ""
