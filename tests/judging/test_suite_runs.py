"""How often the project's suite runs, counted by the project's own conftest.

A real repository whose conftest writes a line for every test run, naming its pytest
session. Its suite has 8 tests, 2 of them failing before the task (the task's). A full
run is 8; the failing tests run first are a session of 2 before it, which alone decides
a failed verdict.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest
from projects import CALC, do_one_task, events_of, git, make_project, task, tasks_on_disk

# One line per test run, naming its session (a copy of a session, forked, names the same).
CONFTEST = '''import os
import uuid

SESSION = uuid.uuid4().hex


def pytest_runtest_call(item):
    with open(os.environ["SUITE_SESSIONS"], "a") as log:
        log.write(SESSION + "\\n")
'''

MORE_TESTS = "\n\n".join(f"def test_more_{n}():\n    assert {n} == {n}" for n in range(5)) + "\n"

# The agent: a fixed add() from the `good`-th attempt on, a wrong one before it (the
# attempts are counted in a file beside the repository); `breaks`: mul() broken on the first.
AGENT = '''import pathlib, sys
count = pathlib.Path(sys.argv[1])
n = int(count.read_text()) + 1 if count.exists() else 1
count.write_text(str(n))
good, breaks = int(sys.argv[2]), sys.argv[3] == "1"
add = "a + b" if n >= good else "abs(a) + abs(b)"
mul = "a + b" if breaks and n == 1 else "a * b"
pathlib.Path("calc.py").write_text(f"def add(a, b):\\n    return {add}\\n\\n\\ndef mul(a, b):\\n    return {mul}\\n")
'''

NOTE_AGENT = "import pathlib, uuid; pathlib.Path('NOTES.md').write_text(f'add fixed {uuid.uuid4()}')\n"


def suite_project(repo: Path, home: Path, *, good: int = 1, breaks: bool = False, tasks: list | None = None,
                  retry: dict | None = None, files: dict | None = None, checks: dict | None = None) -> Path:
    (home / "agent.py").write_text(AGENT)
    command = f"python3 {home / 'agent.py'} {home / 'count'} {good} {int(breaks)} {{prompt_file}}"
    config = {"executor": {"kind": "command", "command": command}, "reflexion": {"useLLM": False, "maxRetries": 3},
              "testCommands": ["python3 -m pytest -q -p no:cacheprovider"], "retry": retry or {},
              "checks": checks or {}}
    return make_project(repo, [], config=config, tasks=tasks,
                        files={"conftest.py": CONFTEST, "test_more.py": MORE_TESTS, **(files or {})})


@pytest.fixture
def sessions(tmp_path, monkeypatch):
    log = tmp_path / "sessions.log"
    monkeypatch.setenv("SUITE_SESSIONS", str(log))
    return lambda: list(collections.Counter(log.read_text().split()).values()) if log.exists() else []


@pytest.mark.slow
def test_a_task_fixed_at_once_runs_the_suite_twice_in_all(git_repo, tmp_path, sessions):
    repo = suite_project(git_repo, tmp_path)

    assert do_one_task(repo) == 0

    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert sessions() == [8, 2, 8]  # the base; then the failing tests first, and the whole suite in its order


@pytest.mark.slow
def test_a_wrong_fix_is_known_from_the_failing_tests_alone(git_repo, tmp_path, sessions):
    repo = suite_project(git_repo, tmp_path, good=2)

    assert do_one_task(repo) == 0

    assert sessions() == [8, 2, 2, 8]  # attempt 1: the 2 tests still fail, and the other 6 never ran
    first = events_of(repo, "verdict")[0]
    assert not first["passed"]
    assert "only the 2 test(s) that failed before or that it changed ran (of 8)" in first["summary"]
    assert [e["outcome"] for e in events_of(repo, "verdict")] == ["failed", "passed"]  # as with it off, below
    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"


@pytest.mark.slow
def test_a_broken_test_is_rerun_alone_before_it_is_believed(git_repo, tmp_path, sessions):
    repo = suite_project(git_repo, tmp_path, good=1, breaks=True)

    assert do_one_task(repo) == 0

    # attempt 1 fixes add and breaks mul: the whole suite finds it, and its rerun alone at
    # the session's end fails again (no session of its own); attempt 2 runs it first, with
    # the base's failing tests, then the whole suite.
    assert sessions() == [8, 2, 9, 3, 8]
    assert [e["outcome"] for e in events_of(repo, "verdict")] == ["failed", "passed"]


ORDERED_TESTS = '''import calc

SEEN = []


def test_mul():
    SEEN.append("mul")
    assert calc.mul(3, 4) == 12


def test_add():  # passes alone, but never after test_mul: an order-dependent test
    assert calc.add(2, 3) == 5 and not SEEN
'''


@pytest.mark.slow
def test_an_order_dependent_test_that_passes_alone_never_passes_the_task(git_repo, tmp_path, sessions):
    repo = suite_project(git_repo, tmp_path, files={"test_calc.py": ORDERED_TESTS})

    assert do_one_task(repo) != 0

    verdicts = events_of(repo, "verdict")
    assert verdicts and all(e["outcome"] == "failed" for e in verdicts)  # neither passed nor flaky
    assert tasks_on_disk(repo)["T-1"]["status"] != "closed"
    assert sessions() == [7, 1, 7]  # test_add alone first passes; then the suite in its order fails it


# A fix whose code needs a file that only its own tests leave behind: add() logs each call
# to add.log in the working folder, and total() reads that log. A test of total() that
# runs before any test of add(), as in the suite's own order, finds no log and fails.
LOGGED_CALC = '''import pathlib


def add(a, b):
    with open("add.log", "a") as log:
        log.write("add\\n")
    return a + b


def mul(a, b):
    return a * b


def total():
    return len(pathlib.Path("add.log").read_text().split()) * 0
'''

EARLY_TEST = "import calc\n\n\ndef test_total():\n    assert calc.total() == 0\n"


@pytest.mark.slow
def test_what_the_failing_tests_wrote_first_is_gone_before_the_whole_suite_runs(git_repo, tmp_path, sessions):
    base_calc = CALC + "\n\ndef total():\n    return 0\n"
    repo = suite_project(git_repo, tmp_path, files={"test_a_early.py": EARLY_TEST, "calc.py": base_calc})
    (tmp_path / "logged_calc.py").write_text(LOGGED_CALC)
    (tmp_path / "agent.py").write_text(
        f"import pathlib, shutil; shutil.copy({str(tmp_path / 'logged_calc.py')!r}, 'calc.py')\n")

    assert do_one_task(repo) != 0  # in a clean clone, `pytest` fails test_total: so must every verdict

    verdicts = events_of(repo, "verdict")
    assert verdicts and all(e["outcome"] == "failed" for e in verdicts)
    assert "test_a_early.py::test_total" in verdicts[0]["summary"]
    assert tasks_on_disk(repo)["T-1"]["status"] != "closed"
    assert "add.log" not in git(repo, "log", "--all", "--name-only", "--format=")


@pytest.mark.slow
def test_switched_off_every_attempt_runs_the_whole_suite(git_repo, tmp_path, sessions):
    repo = suite_project(git_repo, tmp_path, good=2, retry={"failingFirst": False})

    assert do_one_task(repo) == 0

    assert sessions() == [8, 8, 8]
    assert [e["outcome"] for e in events_of(repo, "verdict")] == ["failed", "passed"]


@pytest.mark.slow
def test_a_second_task_on_the_judged_tree_takes_its_recorded_run(git_repo, tmp_path, sessions):
    second = task("T-2", "Note the fix", type="chore", description="Write the fix down in NOTES.md.")
    repo = suite_project(git_repo, tmp_path, tasks=[task(), second])

    assert do_one_task(repo, "--task", "T-1") == 0
    (tmp_path / "agent.py").write_text(NOTE_AGENT)
    assert do_one_task(repo, "--task", "T-2") == 0

    assert [e["recorded"] for e in events_of(repo, "preflight")] == [False, True]
    assert sessions() == [8, 2, 8, 8]  # T-2: no base run, then its own run (no test failed before it)
    assert tasks_on_disk(repo)["T-2"]["status"] == "closed"


@pytest.mark.slow
def test_with_record_runs_off_every_task_runs_its_base(git_repo, tmp_path, sessions):
    second = task("T-2", "Note the fix", type="chore", description="Write the fix down in NOTES.md.")
    repo = suite_project(git_repo, tmp_path, tasks=[task(), second], checks={"recordRuns": False})

    assert do_one_task(repo, "--task", "T-1") == 0
    (tmp_path / "agent.py").write_text(NOTE_AGENT)
    assert do_one_task(repo, "--task", "T-2") == 0

    assert [e["recorded"] for e in events_of(repo, "preflight")] == [False, False]
    assert sessions() == [8, 2, 8, 8, 8]  # T-2 runs its base again
    assert not (repo / ".openagents" / "baselines").exists()


@pytest.mark.slow
def test_a_changed_file_or_a_tracked_record_means_the_suite_runs(git_repo, tmp_path, sessions):
    notes = [task(n, "Note it", type="chore", description="Write the fix down in NOTES.md.") for n in ("T-2", "T-3")]
    repo = suite_project(git_repo, tmp_path, tasks=[task(), *notes])
    assert do_one_task(repo, "--task", "T-1") == 0
    (tmp_path / "agent.py").write_text(NOTE_AGENT)
    records = sorted((repo / ".openagents" / "baselines").glob("*.json"))
    assert records and all(json.loads(r.read_text())["key"]["project"] == str(repo.resolve()) for r in records)

    (repo / "test_more.py").write_text(MORE_TESTS + "\n\ndef test_new():\n    assert True\n")
    git(repo, "commit", "-qam", "a test more")
    assert do_one_task(repo, "--task", "T-2") == 0  # a changed file: a new tree, run
    git(repo, "add", "-f", ".openagents/baselines")
    git(repo, "commit", "-qm", "records committed by someone")
    assert do_one_task(repo, "--task", "T-3") == 0  # its record is tracked now: not trusted

    assert [e["recorded"] for e in events_of(repo, "preflight")] == [False, False, False]
    assert sessions()[3] == 9 and sessions()[-2] == 9


@pytest.mark.slow
def test_overnight_takes_the_tree_the_last_task_was_judged_on(git_repo, tmp_path, sessions):
    from orchestrator.cli import overnight_main

    notes = [task(n, "Note it", type="chore", description="Write it down in NOTES.md.") for n in ("T-1", "T-2")]
    repo = suite_project(git_repo, tmp_path, tasks=notes)
    (tmp_path / "agent.py").write_text(NOTE_AGENT)

    assert overnight_main([str(repo)]) == 0

    assert [e["recorded"] for e in events_of(repo, "preflight")] == [False, True]
    assert sessions() == [8, 8, 8]  # one base run; each task's own run (the 2 failing at the base decide nothing)
    bookkeeping = [s for s in git(repo, "log", "--format=%s").splitlines() if s.endswith("goldenloop bookkeeping")]
    assert len(bookkeeping) == 1  # one bookkeeping commit for the run, not one per task
    assert all(t["status"] == "closed" for t in tasks_on_disk(repo).values())
    assert git(repo, "status", "--porcelain", "--", ".openagents/tasks.jsonl") == ""  # the board committed


@pytest.mark.slow
def test_parallel_tasks_share_a_base_run_and_the_next_task_takes_the_landing_check_s(git_repo, tmp_path, sessions):
    from orchestrator.cli import overnight_main

    notes = [task(n, "Note it", type="chore", description=f"Write it down in NOTES_{n}.md.")
             for n in ("T-1", "T-2", "T-3")]
    repo = suite_project(git_repo, tmp_path, tasks=notes)
    board = repo / ".openagents" / "tasks.jsonl"
    third, board_text = board.read_text().splitlines()[-1], board.read_text()
    board.write_text(board_text.replace(third + "\n", ""))
    git(repo, "commit", "-qam", "two tasks for tonight")
    (tmp_path / "agent.py").write_text(
        "import pathlib, uuid; pathlib.Path(f'NOTES_{uuid.uuid4().hex}.md').write_text('noted')\n")

    assert overnight_main(["--parallel", "2", str(repo)]) == 0

    assert sorted(e["recorded"] for e in events_of(repo, "preflight")) == [False, True]
    # One base run for both (the second took the first's record); each task's own run; and
    # the checks of the second on top of the first, which landed while it ran.
    assert sessions() == [8, 8, 8, 8]
    assert all(t["status"] == "closed" for t in tasks_on_disk(repo).values())

    # The landing check judged the tree both landed as: a task started on it takes that run.
    with board.open("a") as more:
        more.write(third + "\n")
    assert do_one_task(repo, "--task", "T-3") == 0
    assert [e["recorded"] for e in events_of(repo, "preflight")][-1] is True
    assert sessions() == [8, 8, 8, 8, 8]  # T-3's own run, and no base run
