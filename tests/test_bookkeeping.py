"""The bookkeeping commit holds what goldenloop wrote under `.openagents/`, never a pending
change of yours there: not your config, not a file you put there, not a task you added."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from projects import FIX_ADD, do_one_task, git, make_project, task

from orchestrator.git.bookkeeping import own_tasks


@pytest.mark.parametrize("flags", [["--allow-dirty"], []], ids=["allow-dirty", "clean-tree"])
def test_your_pending_changes_under_openagents_stay_yours(
    git_repo: Path, capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    replies = [{"match": "Task T-1", "reply": FIX_ADD}]
    repo = make_project(git_repo, replies, config={"reflexion": {"useLlm": False}})
    meta = repo / ".openagents"
    config = json.loads((meta / "project.json").read_text())
    config["checks"] = {"knownFailures": ["test_calc.py::test_mul"]}  # what `goldenloop checks waive` writes
    (meta / "project.json").write_text(json.dumps(config, indent=1))
    (meta / "model.json").write_text('{"mine": true}\n')
    with (meta / "tasks.jsonl").open("ab") as backlog:  # a task added by hand, not committed
        backlog.write(orjson.dumps(task("T-2", "Later", priority=3)) + b"\n")

    assert do_one_task(repo, *flags, "--task", "T-1") == 0

    assert git(repo, "log", "-1", "--format=%s") == "T-1: goldenloop bookkeeping\n"
    committed = git(repo, "show", "--name-only", "--format=", "HEAD").split()
    assert ".openagents/project.json" not in committed and ".openagents/model.json" not in committed
    backlog = [json.loads(line) for line in git(repo, "show", "HEAD:.openagents/tasks.jsonl").splitlines()]
    assert [(t["id"], t["status"]) for t in backlog] == [("T-1", "closed")]  # T-2 is still yours alone
    assert sorted(git(repo, "status", "--porcelain").splitlines()) == [
        " M .openagents/project.json", " M .openagents/tasks.jsonl", "?? .openagents/model.json"]
    assert json.loads((meta / "project.json").read_text()) == config
    said = [line for line in capsys.readouterr().out.splitlines() if ".openagents/project.json" in line]
    assert len(said) == 1 and "never committed by goldenloop" in said[0]


def test_of_a_backlog_you_edited_the_run_commits_each_tasks_state_and_the_tasks_it_worked_on() -> None:
    head = b'{"id":"T-1","title":"a","status":"open"}\n{"id":"T-3","title":"c","status":"open"}\n'
    # As the run began: a killed run had closed T-3, you had retitled it and added T-2.
    start = (b'{"id":"T-1","title":"a","status":"open"}\n{"id":"T-3","title":"yours","status":"closed"}\n'
             b'{"id":"T-2","title":"b","status":"open"}\n')
    now = start.replace(b'"title":"a","status":"open"', b'"title":"a","status":"closed"')  # the run closed T-1

    assert own_tasks(start, now, head) == (b'{"id":"T-1","title":"a","status":"closed"}\n'
                                           b'{"id":"T-3","title":"c","status":"closed"}\n')
