"""The judge's cases, each through `do-one-task` on a real repository with real pytest:
an attempt can never change what judges it, and "done" means a test shows the change.

Every wrong attempt here passes in the tree it was written in; the judge runs where the
agent never was, on exactly what would be committed, with the base's own tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from projects import PY, do_one_task, events_of, git, goldenloop, init_repo, run_summaries, tasks_on_disk
from shop import (
    ADD,
    ADD_NEGATIVE,
    BUG,
    CALC,
    CALC_FIXED,
    CALC_TESTS,
    COMMENT,
    FEATURE,
    FIX,
    HALF_REORDER,
    REORDER,
    REORDER_TESTS,
    TODO_TESTS,
    committed,
    make_shop,
    pytest_fails,
    swap,
    whole,
)

from orchestrator.cli import overnight_main
from orchestrator.layout import Layout

Capsys = pytest.CaptureFixture[str]
PATCH_ADD = "import calc\n\ncalc.add = lambda a, b: a + b\n"
ALSO_ON_THE_BASE = '\n\ndef test_add_item_twice():\n    assert add_item([], "a") == ["a"]\n'


@pytest.fixture(autouse=True)
def plain_child_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def verdicts(repo: Path, task_id: str = "T-1") -> list[dict]:
    return events_of(repo, "verdict", task_id)


# -- an attempt that changes what judges it ------------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(whole("tests/test_aaa_setup.py", PATCH_ADD + "\n\ndef test_setup():\n    assert True\n",
                           "A setup module makes add behave."), id="a new test file patches the code"),
        pytest.param(whole("tests/__init__.py", PATCH_ADD, "The tests package sets add up."),
                     id="a new tests/__init__.py patches the code"),
        pytest.param(whole("pytest.ini", "[pytest]\naddopts = --ignore=tests/test_calc.py\n", "Skip the slow file.")
                     + whole("tests/test_more.py", "def test_more():\n    assert 1 + 1 == 2\n"),
                     id="pytest.ini ignores the failing file, one new test keeps the count"),
        pytest.param(whole("pyproject.toml", f'[tool.pytest.ini_options]\naddopts = "--deselect {ADD} '
                           f'--deselect {ADD_NEGATIVE}"\n', "Out of scope."), id="pyproject deselects the tests"),
    ],
)
def test_an_attempt_cannot_change_how_the_old_tests_run(git_repo: Path, capsys: Capsys, reply: str) -> None:
    repo = make_shop(git_repo, [{"match": "Task T-1", "reply": reply}])
    start = head(repo)

    assert do_one_task(repo) == 1

    assert tasks_on_disk(repo)["T-1"]["status"] == "blocked"
    assert committed(repo, start) == []  # calc.py unchanged in any commit, and nothing else either
    (verdict,) = verdicts(repo)
    assert verdict["parts"]["aboutFailing"] == [ADD, ADD_NEGATIVE]
    assert pytest_fails(repo) == [ADD, ADD_NEGATIVE]
    assert f"FAIL  failed: 2 test(s) the task is about still fail: {ADD} and {ADD_NEGATIVE}" in capsys.readouterr().out


def test_a_fix_that_needs_an_ignored_file_is_refused_and_the_file_named(git_repo: Path, capsys: Capsys) -> None:
    helper = whole("generated/fix.py", "def plus(a, b):\n    return a + b\n")
    uses = swap("calc.py", "def add(a, b):\n    return a - b", "from generated.fix import plus\n\n\n"
                "def add(a, b):\n    return plus(a, b)", "Reuse the generated helper.")
    repo = make_shop(git_repo, [{"match": "Task T-1", "reply": helper + uses}], ignore="generated/\n")
    start = head(repo)

    assert do_one_task(repo) == 1

    (verdict,) = verdicts(repo)
    assert verdict["outcome"] == "failed"
    assert ("the checks ran on exactly what would be committed, which lacks `generated` (git ignores it)"
            in verdict["summary"])
    assert committed(repo, start) == []
    assert "lacks `generated` (git ignores it)" in capsys.readouterr().out


def test_a_check_that_needs_a_file_the_commit_lacks_blocks_the_task_in_one_sentence(
    git_repo: Path, capsys: Capsys
) -> None:
    script = "#!/bin/sh\nexec python3 -m pytest -q -p no:cacheprovider tests\n"
    repo = make_shop(git_repo, [], config={"testCommands": ["./run_tests.sh"]}, ignore="run_tests.sh\n")
    (repo / "run_tests.sh").write_text(script)
    (repo / "run_tests.sh").chmod(0o755)

    assert do_one_task(repo) == 1

    blocked = tasks_on_disk(repo)["T-1"]
    assert blocked["status"] == "blocked" and blocked["closeReason"].startswith("environment: ")
    assert "lacks `run_tests.sh` (git ignores it) from your checkout" in blocked["closeReason"]
    assert events_of(repo, "attempt_started") == []
    err = capsys.readouterr()
    assert "Traceback" not in err.out + err.err


# -- done means a test shows the change ----------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "closes", "says"),
    [
        pytest.param(whole("todo.py", HALF_REORDER, "A first version."), False, "no test shows the change",
                     id="half the feature, no test"),
        pytest.param(whole("todo.py", HALF_REORDER) + whole("tests/test_todo.py", TODO_TESTS + ALSO_ON_THE_BASE),
                     False, "no test shows the change", id="tests that also pass on the base"),
        pytest.param(whole("todo.py", REORDER) + whole("tests/test_reorder.py", REORDER_TESTS), True,
                     "fail-to-pass 1 (tests/test_reorder.py::test_reorder_list)",
                     id="a new test that fails on the base"),
    ],
)
def test_a_feature_is_done_when_a_new_test_fails_before_it_and_passes_after(
    git_repo: Path, capsys: Capsys, reply: str, closes: bool, says: str
) -> None:
    # The bug's tests fail in another file meanwhile: they are T-1's, never T-2's.
    repo = make_shop(git_repo, [{"match": "Task T-2", "reply": reply}], tasks=[FEATURE])
    start = head(repo)

    assert do_one_task(repo, "--task", "T-2") == (0 if closes else 1)

    found = tasks_on_disk(repo)["T-2"]
    assert found["status"] == ("closed" if closes else "blocked")
    (verdict,) = verdicts(repo, "T-2")
    assert says in verdict["summary"]
    if closes:
        assert committed(repo, start) == ["tests/test_reorder.py", "todo.py"]
        assert f"still failing, not this task's: {ADD} and {ADD_NEGATIVE}" in found["closeReason"]
        assert verdict["parts"]["failToPass"] == ["tests/test_reorder.py::test_reorder_list"]
    else:
        assert committed(repo, start) == []
    assert says in capsys.readouterr().out


def test_a_bug_fix_with_a_regression_test_appended_to_the_old_file_closes(git_repo: Path, capsys: Capsys) -> None:
    appended = whole("tests/test_calc.py", CALC_TESTS + "\n\ndef test_add_zero():\n    assert add(0, 5) == 5\n")
    repo = make_shop(git_repo, [{"match": "Task T-1", "reply": FIX + appended}])
    start = head(repo)

    assert do_one_task(repo, "--json") == 0

    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert committed(repo, start) == ["calc.py", "tests/test_calc.py"]
    (verdict,) = verdicts(repo)
    assert verdict["parts"]["failToPass"] == [ADD, ADD_NEGATIVE]  # the old tests show it: the new one need not
    assert pytest_fails(repo) == []
    # The verdict's parts, wherever a verdict is shown: --json, the summary, show, the morning report.
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [e["parts"]["passToPass"] for e in printed if e.get("event") == "verdict"] == [2]
    (summary,) = run_summaries(repo)
    assert summary["tasks"][0]["verdict"]["failToPass"] == [ADD, ADD_NEGATIVE]
    assert goldenloop(repo, "show", "T-1") == 0
    assert "verdict: pass-to-pass 2 · fail-to-pass 2" in capsys.readouterr().out
    (page,) = (repo / ".openagents" / "runs").glob("*.html")
    assert "<td>pass-to-pass 2 · fail-to-pass 2</td>" in page.read_text()


def test_a_docs_task_closes_on_pass_to_pass_while_another_tasks_tests_fail(git_repo: Path) -> None:
    docs = {**BUG, "id": "T-3", "title": "Say what add does", "type": "docs",
            "description": "One line in README.md on what add() returns."}
    reply = swap("README.md", "Helpers for a small shop.", "Helpers for a small shop: add() returns a sum.")
    repo = make_shop(git_repo, [{"match": "Task T-3", "reply": reply}], tasks=[docs])

    assert do_one_task(repo) == 0

    closed = tasks_on_disk(repo)["T-3"]
    assert closed["status"] == "closed" and "pass-to-pass 2" in closed["closeReason"]
    assert f"still failing, not this task's: {ADD} and {ADD_NEGATIVE}" in closed["closeReason"]


# -- the task's own tests: never waived, never guessed out ------------------------------------------


def test_a_waiver_of_every_test_does_not_cover_a_file_the_task_names(git_repo: Path) -> None:
    repo = make_shop(git_repo, [{"match": "Task T-1", "reply": COMMENT}],
                     tasks=[{**BUG, "description": "add(2, 3) must return 5; tests/test_calc.py fails."}],
                     config={"checks": {"knownFailures": ["tests/*"]}})
    start = head(repo)

    assert do_one_task(repo) == 1

    assert tasks_on_disk(repo)["T-1"]["status"] == "blocked"
    assert committed(repo, start) == []
    assert [v["outcome"] for v in verdicts(repo)] == ["failed"]


def test_the_adoption_flow_of_waiving_the_baseline_never_closes_a_task_on_a_comment(
    git_repo: Path, capsys: Capsys
) -> None:
    named = {**BUG, "type": "task", "title": "Make the tests pass",
             "description": "Make the failing tests in tests/test_calc.py pass."}
    repo = make_shop(git_repo, [{"match": "Task T-1", "reply": COMMENT}], tasks=[named])
    assert goldenloop(repo, "checks", "baseline", "--waive", "--reason", "adopting goldenloop") == 0
    git(repo, "commit", "-qam", "waive the baseline")
    start = head(repo)

    assert do_one_task(repo) == 1

    blocked = tasks_on_disk(repo)["T-1"]
    assert blocked["status"] == "blocked" and "checks waive" not in blocked["closeReason"]
    assert blocked["closeReason"].startswith(f"2 test(s) this task is about still fail, so it is not done: {ADD}")
    assert committed(repo, start) == []


def test_a_subtask_is_not_blocked_by_a_failing_test_a_later_subtask_fixes(git_repo: Path) -> None:
    plan = json.dumps({"subtasks": [
        {"title": "Add a sum_all helper", "description": "sum_all(values) in calc.py, built on add()."},
        {"title": "Fix add", "description": "Make add() return the sum so tests/test_calc.py passes."}]})
    helper = swap("calc.py", "def mul(a, b):", "def sum_all(values):\n    total = 0\n    for value in values:\n"
                  "        total = add(total, value)\n    return total\n\n\ndef mul(a, b):", "A helper first.")
    replies = [{"match": "Split this coding task", "reply": plan},
               {"match": "Add a sum_all helper", "reply": helper},
               {"match": "Subtask T-1.2|Fix add", "reply": FIX}]
    long_bug = {**BUG, "description": BUG["description"] + " Also add sum_all(values) built on add()."}
    repo = make_shop(git_repo, replies, tasks=[long_bug], config={"decomposeMinChars": 1})

    assert do_one_task(repo) == 0

    first, second = verdicts(repo)
    assert first["subtaskId"] == "T-1.1" and first["outcome"] == "passed"  # test_add is subtask 2's to fix
    assert second["subtaskId"] == "T-1.2" and second["parts"]["failToPass"] == [ADD, ADD_NEGATIVE]
    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert (repo / "calc.py").read_text().count("def sum_all") == 1


def test_reopen_of_a_closed_task_runs_the_agent_again(git_repo: Path, capsys: Capsys) -> None:
    repo = make_shop(git_repo, [{"match": "Task T-1", "reply": FIX, "times": 2}])
    assert do_one_task(repo) == 0
    assert (repo / "calc.py").read_text() == CALC_FIXED
    (repo / "calc.py").write_text(CALC)  # the fix is lost in a later change
    git(repo, "commit", "-qam", "a refactor that brought the bug back")
    capsys.readouterr()

    assert goldenloop(repo, "reopen", "T-1") == 0
    assert "its subtasks will run again against the checks" in capsys.readouterr().out
    assert do_one_task(repo) == 0

    started = events_of(repo, "attempt_started", "T-1")
    assert len(started) == 2  # the second run ran the agent: never closed with 0 attempts
    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert pytest_fails(repo) == []


def test_a_plan_all_done_is_run_again_when_a_test_the_task_is_about_fails(git_repo: Path) -> None:
    repo = make_shop(git_repo, [{"match": "Task T-1", "reply": FIX}])
    plan = {"taskId": "T-1", "subtasks": [{"id": "T-1.1", "title": "Fix add", "status": "done"}]}
    path = Layout(repo).plan("T-1")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(plan))  # left by a run that thought the task done

    assert do_one_task(repo) == 0

    assert len(events_of(repo, "attempt_started", "T-1")) == 1
    (again,) = events_of(repo, "plan_not_done", "T-1")
    assert again["failing"] == [ADD, ADD_NEGATIVE]
    assert pytest_fails(repo) == []


REORDER_FIRST_TESTS = '''from todo import reorder_list


def test_reorder_keeps_every_item():
    assert sorted(reorder_list(["a", "b"], [1, 0])) == ["a", "b"]


def test_reorder_puts_items_in_the_order_given():
    assert reorder_list(["a", "b", "c"], [2, 0, 1]) == ["c", "a", "b"]
'''


def test_half_the_tests_of_one_file_is_half_a_fix_whatever_the_task_names(git_repo: Path) -> None:
    # The tests were written first (the file cannot even be collected before the change); the
    # task's words name none of them. The attempt makes one pass: the file's other test is the
    # task's too, so it is not done, and the verdict names the test left.
    repo = make_shop(git_repo, [{"match": "Task T-2", "reply": whole("todo.py", HALF_REORDER)}], tasks=[FEATURE],
                     files={"tests/test_reorder.py": REORDER_FIRST_TESTS})
    start = head(repo)

    assert do_one_task(repo, "--task", "T-2") == 1

    (verdict,) = verdicts(repo, "T-2")
    assert verdict["parts"]["failToPass"] == []  # the file is not fixed: one of its tests is
    assert verdict["parts"]["aboutFailing"] == ["tests/test_reorder.py::test_reorder_puts_items_in_the_order_given"]
    assert verdict["parts"]["stillFailing"] == [ADD, ADD_NEGATIVE]  # T-1's, another file: never T-2's
    assert committed(repo, start) == []


# -- overnight, alone and in parallel: one hard bug never blocks the tasks after it --------------


@pytest.mark.slow
@pytest.mark.parametrize("parallel", ["1", "2"])
def test_overnight_blocks_the_patched_bug_and_closes_the_feature_beside_it(git_repo: Path, parallel: str) -> None:
    patch = whole("tests/test_aaa_setup.py", PATCH_ADD + "\n\ndef test_setup():\n    assert True\n")
    feature = whole("todo.py", REORDER) + whole("tests/test_reorder.py", REORDER_TESTS)
    repo = make_shop(git_repo, [{"match": "Task T-1", "reply": patch, "times": None},
                                {"match": "Task T-2", "reply": feature}], tasks=[BUG, FEATURE])
    start = head(repo)

    assert overnight_main([str(repo), "--parallel", parallel]) == 1  # something is blocked

    board = tasks_on_disk(repo)
    assert board["T-1"]["status"] == "blocked" and board["T-2"]["status"] == "closed"
    assert f"still failing, not this task's: {ADD} and {ADD_NEGATIVE}" in board["T-2"]["closeReason"]
    assert committed(repo, start) == ["tests/test_reorder.py", "todo.py"]  # nothing of T-1's
    assert pytest_fails(repo) == [ADD, ADD_NEGATIVE]
    assert git(repo, "status", "--porcelain") == ""


CHECK_SCRIPT = """import sys
from calc import add

sys.exit(0 if add(2, 3) == 5 else "add(2, 3) is not 5")
"""


def test_a_runner_that_names_no_test_decides_by_its_exit_code_and_the_note_says_so(git_repo: Path) -> None:
    repo = make_shop(git_repo, [{"match": "Task T-1", "reply": FIX}], files={"check.py": CHECK_SCRIPT},
                     config={"testCommands": [f"{PY} check.py"]})

    assert do_one_task(repo) == 0

    closed = tasks_on_disk(repo)["T-1"]
    assert closed["status"] == "closed"
    assert "no test shows the change (the runner names no passing test)" in closed["closeReason"]
    (verdict,) = verdicts(repo)
    assert verdict["parts"]["testIds"] is False and verdict["parts"]["proof"] == "not reported"


def test_the_setup_command_runs_in_the_judges_tree_and_a_failing_one_stops_the_task(git_repo: Path) -> None:
    # The tests need a file a build step writes; git ignores it, so only checks.setup can make it there.
    generated = "from calc import add\n\n\ndef test_generated():\n    assert add(1, 1) == 2\n"
    setup = f"{PY} -c \"import pathlib; pathlib.Path('tests/test_generated.py').write_text({generated!r})\""
    repo = make_shop(git_repo, [{"match": "Task T-1", "reply": FIX}], config={"checks": {"setup": [setup]}},
                     ignore="tests/test_generated.py\n")

    assert do_one_task(repo) == 0

    (verdict,) = verdicts(repo)
    assert "tests/test_generated.py::test_generated" in verdict["parts"]["failToPass"]  # it ran there
    assert not (repo / "tests" / "test_generated.py").exists()  # never in your checkout

    broken = make_shop(init_repo(git_repo.parent / "broken"), [], config={"checks": {"setup": ["exit 3"]}})
    assert do_one_task(broken) == 1
    reason = tasks_on_disk(broken)["T-1"]["closeReason"]
    assert reason.startswith("environment: The setup command `exit 3` (checks.setup) exited with 3")
