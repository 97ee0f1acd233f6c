"""A verdict you can believe: a task closes only when its checks prove it.

A small library with a real bug whose failing tests are already written, the most common
thing a user hands a test-driven loop. The scripted model answers as models do (a line of
explanation, then a SEARCH/REPLACE block); `do-one-task` and `goldenloop` run in-process,
on real repositories with real pytest. Each wrong or empty fix must leave the task blocked
with nothing committed and a sentence that says what to do; each right one must close it,
and what the user waived is named wherever the verdict is shown.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from projects import (
    PY,
    do_one_task,
    events_of,
    git,
    goldenloop,
    make_project,
    run_summaries,
    task,
    tasks_on_disk,
)

Capsys = pytest.CaptureFixture[str]
STATS = '''"""Counting things in text."""


def word_count(text):
    return len(text.split(" "))
'''
STATS_TESTS = '''from textkit.stats import word_count


def test_word_count_simple():
    assert word_count("one two three") == 3


def test_word_count_collapses_whitespace():
    assert word_count("one  two   three") == 3


def test_word_count_empty():
    assert word_count("") == 0
'''
LEGACY_TESTS = '''def test_unicode_width():
    assert len("\\u00e9") == 2  # a wide-character table that was never written
'''
README = "# textkit\n\nSmall helpers for text.\n"
COLLAPSES = "tests/test_stats.py::test_word_count_collapses_whitespace"
EMPTY = "tests/test_stats.py::test_word_count_empty"
LEGACY = "tests/test_legacy.py::test_unicode_width"
TASK = "Fix word_count on repeated whitespace"
DESCRIPTION = "word_count miscounts text with several spaces or tabs between words."


def fix(new: str, why: str = "The split is on a single space.", old: str = 'return len(text.split(" "))') -> str:
    """A reply the way models write one: a sentence, then one SEARCH/REPLACE block."""
    return (f"{why} Here is the change:\n\ntextkit/stats.py\n<<<<<<< SEARCH\n    {old}\n"
            f"=======\n    {new}\n>>>>>>> REPLACE\n")


RIGHT = fix("return len(text.split())")
STRIP = fix('return len(text.strip().split(" "))', "Leading and trailing spaces add empty words.")
PARTIAL = fix("return max(1, len(text.split()))", "Split on any whitespace; a text has at least one word.")
EMPTY_TOO = fix("return len(text.split())", "An empty text has no words.", old="return max(1, len(text.split()))")
STRIP_WHOLE = ("Strip the text first:\n\n" + "textkit/stats.py\n<<<<<<< FILE\n"
               + STATS.replace('text.split(" ")', 'text.strip().split(" ")') + ">>>>>>> FILE\n")
COMMENT = ("Documenting the behaviour first.\n\ntextkit/stats.py\n<<<<<<< SEARCH\ndef word_count(text):\n=======\n"
           "def word_count(text):\n    # Counts the words of `text`.\n>>>>>>> REPLACE\n")
UNRELATED = ("The README should say what word_count does.\n\nREADME.md\n<<<<<<< SEARCH\nSmall helpers for text.\n"
             "=======\nSmall helpers for text: word_count counts words.\n>>>>>>> REPLACE\n")


def textkit(repo: Path, replies: list[dict[str, Any]], *, description: str = DESCRIPTION,
            title: str = TASK, retries: int = 0, legacy: bool = False, **config: Any) -> Path:
    files = {"textkit/__init__.py": "", "textkit/stats.py": STATS, "tests/test_stats.py": STATS_TESTS,
             "README.md": README}
    if legacy:
        files["tests/test_legacy.py"] = LEGACY_TESTS
    return make_project(
        repo, replies, tasks=[task("T-1", title, description=description, type="bug")], files=files,
        config={"testCommands": [f"{PY} -m pytest -q -p no:cacheprovider tests"],
                "reflexion": {"maxRetries": retries, "useLLM": False}, **config},
    )


@pytest.fixture(autouse=True)
def plain_child_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def pytest_fails(repo: Path) -> list[str]:
    """What the user's own pytest says afterwards: the failing test ids."""
    import subprocess

    done = subprocess.run([PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", "tests"], cwd=repo,
                          capture_output=True, text=True, env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PATH": ""})
    return sorted(re.findall(r"^FAILED (\S+)", done.stdout, re.M))


# -- wrong fixes never close the task ------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "description", "still_failing"),
    [
        pytest.param(STRIP, DESCRIPTION, [COLLAPSES, EMPTY], id="a wrong fix, the task names no test"),
        pytest.param(PARTIAL, DESCRIPTION, [EMPTY], id="a partial fix: one of two failing tests fixed"),
        pytest.param(COMMENT, DESCRIPTION, [COLLAPSES, EMPTY], id="a cosmetic change"),
        pytest.param(UNRELATED, DESCRIPTION, [COLLAPSES, EMPTY], id="an unrelated file"),
        pytest.param(PARTIAL, f"{DESCRIPTION} {COLLAPSES.split('::')[1]} fails.", [EMPTY],
                     id="the task names one of the tests, the other still fails"),
    ],
)
def test_a_fix_that_leaves_a_failing_test_failing_blocks_the_task_and_commits_nothing(
    git_repo: Path, capsys: Capsys, reply: str, description: str, still_failing: list[str]
) -> None:
    repo = textkit(git_repo, [{"match": "Task T-1", "reply": reply}], description=description)
    head = git(repo, "rev-parse", "HEAD").strip()

    assert do_one_task(repo) == 1

    blocked = tasks_on_disk(repo)["T-1"]
    assert blocked["status"] == "blocked"
    shown = " and ".join(still_failing)
    assert blocked["closeReason"].startswith(
        f"{len(still_failing)} test(s) this task is about still fail, so it is not done: {shown}; "
        "`goldenloop reopen T-1` tries again")
    assert "checks waive" not in blocked["closeReason"]  # a waiver of the task's own tests would close it unfixed
    committed = git(repo, "diff", "--name-only", head, "HEAD").split()
    assert committed and all(path.startswith(".openagents/") for path in committed)  # the blocked state only
    assert (repo / "textkit" / "stats.py").read_text() == STATS  # the wrong change was undone
    assert pytest_fails(repo) == [COLLAPSES, EMPTY]
    out = capsys.readouterr().out
    assert f"FAIL  failed: {len(still_failing)} test(s) the task is about still fail: {shown}" in out
    assert "PASS" not in out and "WAIVED" not in out and "closed" not in out
    assert f"blocked T-1: {len(still_failing)} test(s) this task is about still fail, so it is not done" in out
    (summary,) = run_summaries(repo)
    assert [(t["outcome"], t["reason"]) for t in summary["tasks"]] == [("blocked", blocked["closeReason"])]


@pytest.mark.parametrize("retry", [{"strategy": "tree"}, {"fresh": True}], ids=["tree search", "fresh samples"])
def test_the_other_retry_strategies_never_close_the_task_on_wrong_fixes(git_repo: Path, retry: dict) -> None:
    replies = [{"match": "Task T-1", "reply": STRIP, "times": 2}, {"match": "Task T-1", "reply": PARTIAL, "times": None}]
    repo = textkit(git_repo, replies, retries=3, retry=retry)
    head = git(repo, "rev-parse", "HEAD").strip()

    assert do_one_task(repo) == 1

    assert tasks_on_disk(repo)["T-1"]["status"] == "blocked"
    committed = git(repo, "diff", "--name-only", head, "HEAD").split()
    assert all(path.startswith(".openagents/") for path in committed)
    assert (repo / "textkit" / "stats.py").read_text() == STATS
    assert pytest_fails(repo) == [COLLAPSES, EMPTY]
    steered = events_of(repo, "tree_search" if "strategy" in retry else "fresh_retry")
    assert steered  # the retries went the strategy's way, and none of them closed the task


def test_the_agent_is_told_which_tests_fail_before_and_a_retry_is_pointed_at_them(git_repo: Path) -> None:
    told = r"## Tests before any change\nThese tests fail on the repository as it is now, and the task is about them: "
    retry = (r"Failing before the task and still failing: the task is done only when they pass "
             r"\(make them pass\): tests/test_stats\.py::test_word_count_empty")
    replies = [
        # Answers the retry only when it says the old failure is still the task's.
        {"match": retry, "reply": EMPTY_TOO},
        # Answers the first prompt only when it names both tests that fail before any change.
        {"match": told + re.escape(f"{COLLAPSES}, {EMPTY}") + r"\.\nThe task is done only when they pass",
         "reply": PARTIAL},
    ]
    repo = textkit(git_repo, replies, retries=1)

    assert do_one_task(repo) == 0

    assert [e["outcome"] for e in events_of(repo, "verdict")] == ["failed", "passed"]
    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert pytest_fails(repo) == []


def test_a_retry_that_fixes_nothing_more_stops_blocked_with_the_last_failures_named(git_repo: Path) -> None:
    # The same wrong code, every time: a repeat is asked again, then counted as the same failure.
    repo = textkit(git_repo, [{"match": "Task T-1", "reply": STRIP_WHOLE, "times": None}], retries=2)

    assert do_one_task(repo) == 1

    blocked = tasks_on_disk(repo)["T-1"]
    assert blocked["status"] == "blocked" and blocked["closeReason"].startswith(
        f"2 test(s) this task is about still fail, so it is not done: {COLLAPSES} and {EMPTY}")
    assert [e["outcome"] for e in events_of(repo, "verdict")] == ["failed"]
    assert [e["action"] for e in events_of(repo, "repeat")][-1] == "counted as a failed attempt"


def new_file(path: str, content: str, why: str) -> str:
    """A reply that writes a whole file, as models write one."""
    return f"{why}\n\n{path}\n<<<<<<< FILE\n{content}>>>>>>> FILE\n"


DESELECT = " ".join(f"--deselect {test}" for test in (COLLAPSES, EMPTY))


STILL = f"2 test(s) the task is about still fail: {COLLAPSES} and {EMPTY}"


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        pytest.param(new_file("pyproject.toml", f'[tool.pytest.ini_options]\naddopts = "{DESELECT}"\n',
                              "Those two tests are out of scope."), STILL, id="pyproject deselects them"),
        pytest.param(new_file("setup.cfg", "[tool:pytest]\naddopts = -k 'not collapses and not empty'\n",
                              "Run only the stable tests."), STILL, id="setup.cfg selects around them"),
        pytest.param(new_file("textkit/__init__.py", 'import os, sys\n\nif "pytest" in sys.modules:\n'
                              "    os._exit(0)\n", "Skip the slow import under test."),
                     "the test run ended without reporting its tests", id="the package ends pytest with exit 0"),
    ],
)
def test_a_fix_that_stops_the_failing_tests_running_blocks_the_task(
    git_repo: Path, capsys: Capsys, reply: str, says: str
) -> None:
    # The runner passes in the attempt's tree; the judge runs the base's own configuration,
    # and a run that ends before pytest reports its tests shows no test passing.
    repo = textkit(git_repo, [{"match": "Task T-1", "reply": reply}])
    head = git(repo, "rev-parse", "HEAD").strip()

    assert do_one_task(repo) == 1

    assert tasks_on_disk(repo)["T-1"]["status"] == "blocked"
    committed = git(repo, "diff", "--name-only", head, "HEAD").split()
    assert all(path.startswith(".openagents/") for path in committed)
    assert pytest_fails(repo) == [COLLAPSES, EMPTY]
    out = capsys.readouterr().out
    assert f"FAIL  failed: {says}" in out
    assert "PASS" not in out and "closed" not in out


# -- the controls: right fixes and the user's waivers close the task -----------------------------


def test_the_right_fix_closes_the_task(git_repo: Path, capsys: Capsys) -> None:
    repo = textkit(git_repo, [{"match": "Task T-1", "reply": RIGHT}])

    assert do_one_task(repo) == 0

    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert pytest_fails(repo) == []
    out = capsys.readouterr().out
    assert "PASS  passed: 3 tests" in out and "FAIL" not in out and "WAIVED" not in out


def test_a_known_failure_the_user_waived_does_not_block_and_is_named_wherever_the_verdict_is_shown(
    git_repo: Path, capsys: Capsys
) -> None:
    waiver = {"test": LEGACY, "reason": "the width table is not written yet"}
    repo = textkit(git_repo, [{"match": "Task T-1", "reply": RIGHT}], legacy=True,
                   checks={"knownFailures": [waiver]})

    assert do_one_task(repo) == 0

    line = (f"passed: 3 tests — pass-to-pass 1, fail-to-pass 2 ({COLLAPSES} and {EMPTY}); apart from 1 known "
            f"failure(s) waived in checks.knownFailures: {LEGACY}")
    (verdict,) = events_of(repo, "verdict")
    assert (verdict["outcome"], verdict["summary"], verdict["waived"]) == ("waived", line, [LEGACY])
    out = capsys.readouterr().out
    assert f"    WAIVED  {line}" in out and "FAIL" not in out
    assert "preflight: 3 test(s) already failing" in out and "1 waived in checks.knownFailures" in out
    closed = tasks_on_disk(repo)["T-1"]
    assert closed["status"] == "closed" and closed["closeReason"].endswith(
        f"apart from known failures waived in checks.knownFailures: {LEGACY}")
    (summary,) = run_summaries(repo)
    assert summary["tasks"][0]["reason"] == closed["closeReason"]
    report = next((repo / ".openagents" / "runs").glob("*.html")).read_text()
    assert f"attempt 1: WAIVED {line}" in report and "FAIL" not in report
    assert goldenloop(repo, "show", "T-1") == 0
    shown = re.search(r"attempt 1: waived  score [\d.]+  (.*)\n", capsys.readouterr().out)
    assert shown and shown[1].startswith("passed: 3 tests — pass-to-pass 1") and shown[1].endswith(LEGACY)
    assert pytest_fails(repo) == [LEGACY]


def test_a_docs_task_closes_when_the_only_failing_test_is_waived_and_unrelated(git_repo: Path) -> None:
    repo = textkit(git_repo, [{"match": "Task T-1", "reply": UNRELATED}], legacy=True,
                   title="Say what word_count does in the README", description="One line is enough.",
                   checks={"knownFailures": ["tests/test_legacy.py"]})
    (repo / "textkit" / "stats.py").write_text(STATS.replace('text.split(" ")', "text.split()"))
    git(repo, "commit", "-qam", "word_count fixed by hand")

    assert do_one_task(repo) == 0

    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert [e["outcome"] for e in events_of(repo, "verdict")] == ["waived"]


def test_waiving_is_the_users_word_given_through_the_checks_command(git_repo: Path, capsys: Capsys) -> None:
    repo = textkit(git_repo, [], legacy=True)
    config = repo / ".openagents" / "project.json"
    before = json.loads(config.read_text())

    assert goldenloop(repo, "checks", "baseline") == 0  # shows, records nothing
    out = capsys.readouterr().out
    assert f"3 failing test(s):\n  {LEGACY}\n  {COLLAPSES}\n  {EMPTY}\n" in out
    assert "A task is done only when these pass" in out and json.loads(config.read_text()) == before

    assert goldenloop(repo, "checks", "waive", LEGACY, "--reason", "no width table yet") == 0
    assert goldenloop(repo, "checks", "waive", LEGACY) == 0  # twice is once
    after = json.loads(config.read_text())
    assert after["checks"] == {"knownFailures": [{"test": LEGACY, "reason": "no width table yet"}]}
    assert {k: v for k, v in after.items() if k != "checks"} == before  # every other key as it was
    capsys.readouterr()
    assert goldenloop(repo, "checks", "baseline") == 0
    assert f"  {LEGACY}   (waived: no width table yet)\n" in capsys.readouterr().out

    assert goldenloop(repo, "checks", "unwaive", LEGACY) == 0
    assert json.loads(config.read_text())["checks"] == {"knownFailures": []}
    assert goldenloop(repo, "checks", "unwaive", LEGACY) == 1
    assert f"Not in checks.knownFailures: {LEGACY}" in capsys.readouterr().err


def test_waiving_is_not_offered_for_the_tests_the_task_is_about(git_repo: Path, capsys: Capsys) -> None:
    # The task names the module the failing tests test: waiving them would close it unfixed.
    repo = textkit(git_repo, [{"match": "Task T-1", "reply": STRIP}], title="Fix word_count in stats")

    assert do_one_task(repo) == 1

    reason = tasks_on_disk(repo)["T-1"]["closeReason"]
    assert reason.startswith(f"2 test(s) this task is about still fail, so it is not done: {COLLAPSES} "
                             f"and {EMPTY}; `goldenloop reopen T-1` tries again")
    assert "checks waive" not in reason
    capsys.readouterr()
    assert goldenloop(repo, "list") == 0  # the whole reason, on a line of its own
    assert f"\n      {reason}\n" in capsys.readouterr().out
    assert do_one_task(repo, "--task", "T-1") == 3
    assert f"task T-1 is blocked: {reason}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["waive", EMPTY, "--reason", "..."], "--reason '...' is a placeholder: say why these tests may fail"),
        (["waive", EMPTY, "--reason", "why"], "--reason 'why' is a placeholder"),
        (["waive", ""], "a test to waive cannot be empty"),
        (["baseline", "--reason", "old"], "--reason goes with --waive: without it nothing is recorded"),
    ],
)
def test_a_waiver_that_says_nothing_is_refused_in_one_sentence(
    git_repo: Path, capsys: Capsys, argv: list[str], says: str
) -> None:
    repo = textkit(git_repo, [])
    config = (repo / ".openagents" / "project.json").read_text()

    assert goldenloop(repo, "checks", *argv) == 2

    err = capsys.readouterr().err
    assert err.startswith(f"goldenloop checks {argv[0]}: ") and says in err and "Traceback" not in err
    assert (repo / ".openagents" / "project.json").read_text() == config
