"""A fleet worker judges as a local run does: in a clean export of the commit, with the
base's own tests. A new test file that patches the code does not close a bug, and a
feature with a test that shows it closes while the bug's test still fails beside it."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleetkit import PY, make_remote, remote_tasks, start_worker, wait_exit, worker_log, write_script
from projects import git, write_file

from orchestrator.cli import main

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

CALC = "def add(a, b):\n    return a - b\n"
CALC_TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
PATCH = "import calc\n\ncalc.add = lambda a, b: a + b\n\n\ndef test_setup():\n    assert True\n"
GREET = 'def hello(name):\n    return "hello " + name\n'
GREET_TESTS = 'from greet import hello\n\n\ndef test_hello():\n    assert hello("ann") == "hello ann"\n'


def backlog_task(task_id: str, title: str, kind: str, description: str, n: int) -> dict:
    return {"id": task_id, "title": title, "description": description, "status": "open", "priority": 2,
            "type": kind, "labels": [], "deps": [], "createdAt": f"2026-11-01T09:00:0{n}Z",
            "updatedAt": f"2026-11-01T09:00:0{n}Z", "commits": []}


def test_a_fleet_worker_judges_on_the_commit_with_the_bases_tests(pg_server, tmp_path: Path) -> None:
    url = pg_server.new_database()
    model = write_script(tmp_path / "script.json", [
        {"match": "Task B-1:", "reply": write_file("test_aaa_setup.py", PATCH), "times": None},
        {"match": "Task F-1:", "reply": write_file("greet.py", GREET) + write_file("test_greet.py", GREET_TESTS)},
    ])
    tasks = [backlog_task("B-1", "Fix add", "bug", "add() in calc.py returns a - b; test_calc.py fails.", 0),
             backlog_task("F-1", "Add greet", "feature", "Add hello(name) in greet.py, with a test.", 1)]
    remote = make_remote(tmp_path, "shop", tasks, model, files={"calc.py": CALC, "test_calc.py": CALC_TESTS},
                         config={"testCommands": [f"{PY} -m pytest -q -p no:cacheprovider"],
                                 "retry": {"flakyReruns": 0}, "reflexion": {"maxRetries": 0, "useLLM": False}})
    assert main(["enqueue", "--queue", url, "--workdir", str(tmp_path / "enqueuer"), remote, "--json"]) == 0
    logs = tmp_path / "logs"
    worker = start_worker(url, tmp_path / "machine", "w1", logs)

    assert wait_exit([worker]) == [0], worker_log(logs, "w1")

    board = remote_tasks(remote)
    assert board["B-1"]["status"] == "blocked"
    assert board["B-1"]["closeReason"].startswith("1 test(s) this task is about still fail, so it is not done: "
                                                  "test_calc.py::test_add")
    assert board["F-1"]["status"] == "closed"
    assert "still failing, not this task's: test_calc.py::test_add" in board["F-1"]["closeReason"]
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", remote, str(clone))
    assert not (clone / "test_aaa_setup.py").exists() and (clone / "calc.py").read_text() == CALC
    assert (clone / "test_greet.py").exists()
