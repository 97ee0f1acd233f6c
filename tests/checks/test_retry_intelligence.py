"""Retry intelligence end to end: each decision, its reason in the run log, and the CLI line.

Real repositories, real pytest as the test command, the scripted model, `do-one-task` run
in-process. Every test checks what a user would notice: the exit code, the task's state,
what was committed, how many model calls were paid for, and why the loop decided so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from projects import (
    CALC,
    CALC_ABS,
    CALC_FIXED,
    CALC_HANG,
    CALC_TESTS,
    CALC_ZERO,
    FIX_ADD,
    PY,
    REFLECTION,
    WRONG_ADD,
    do_one_task,
    events_of,
    flaky_tests,
    git,
    goldenloop,
    init_repo,
    make_project,
    model_calls,
    run_events,
    task,
    tasks_on_disk,
    write_file,
)

Capsys = pytest.CaptureFixture[str]
REFLECT = {"match": "Failure digest", "reply": REFLECTION, "times": None}
PYTEST = f"{PY} -m pytest -q -p no:cacheprovider"
# A task that names calc but no test and does not ask for "the tests" to pass: a test of
# another module failing at baseline is then not its business.
ADD_ONLY = "add() in calc.py returns a - b; it must return the sum of its arguments."


@pytest.fixture(autouse=True)
def plain_child_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    # The project's own pytest runs need none of this venv's plugins: half the start-up time.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def kinds(repo: Path) -> list[str]:
    return [e["event"] for e in run_events(repo)]


def judged(repo: Path, task_id: str = "T-1") -> list[dict[str, Any]]:
    """The verdicts of attempts judged other than plainly passed or failed."""
    return [e for e in events_of(repo, "verdict", task_id) if e["outcome"] not in ("passed", "failed")]


def committed_files(repo: Path, task_id: str = "T-1") -> list[list[str]]:
    return [e["files"] for e in events_of(repo, "committed", task_id)]


def plan(repo: Path, task_id: str = "T-1") -> dict[str, Any]:
    return json.loads((repo / ".openagents" / "subtasks" / f"{task_id}.json").read_text())


def packet(repo: Path, suffix: str = "md") -> str:
    return (repo / ".openagents" / "escalations" / f"T-1.{suffix}").read_text()


def search_replace(path: str, old: str, new: str) -> str:
    return f"{path}\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n"


# -- 1. preflight ---------------------------------------------------------------------------------


def test_a_missing_test_program_blocks_the_task_before_any_model_call(git_repo: Path, capsys: Capsys) -> None:
    repo = make_project(git_repo, [], config={"testCommands": ["no-such-test-runner --all"]})

    assert do_one_task(repo) == 1

    (pre,) = events_of(repo, "preflight")
    assert "`no-such-test-runner` was not found" in pre["environmentError"]
    (blocked,) = events_of(repo, "task_blocked")
    assert blocked["convergence"] == "environment" and "No model was called" in blocked["reason"]
    assert model_calls(repo) == 0 and "attempt_started" not in kinds(repo)
    assert tasks_on_disk(repo)["T-1"]["closeReason"].startswith("environment: ")
    out = capsys.readouterr().out
    assert "preflight: the checks cannot run" in out and "no-such-test-runner" in out
    assert "blocked T-1: environment:" in out


OTHER = "def other():\n    return 0\n"
OTHER_TESTS = "from other import other\n\n\ndef test_other():\n    assert other() == 1\n"


def test_another_tasks_failing_test_never_blocks_a_task_and_its_close_note_lists_it(
    git_repo: Path, capsys: Capsys
) -> None:
    tasks = [
        task("T-1", "Fix add", description=ADD_ONLY),
        task("T-2", "Make other() return 1", priority=2,
             description="other() in other.py returns 0; test_other expects 1."),
    ]
    replies = [
        REFLECT,
        {"match": "Task T-1", "reply": FIX_ADD, "times": None},
        # T-2's attempt leaves other() as it is: its failure is the task's own.
        {"match": "Task T-2", "reply": write_file("other.py", "# other() must return 1\n" + OTHER)},
    ]
    repo = make_project(
        git_repo, replies, tasks=tasks,
        files={"other.py": OTHER, "test_other.py": OTHER_TESTS},
        config={"testCommands": [f"{PYTEST} test_calc.py test_other.py"], "reflexion": {"maxRetries": 0}},
    )

    # T-1 fixes add; test_other is T-2's, so it does not keep T-1 open, and T-1's note says it still fails.
    assert do_one_task(repo) == 0
    (pre,) = events_of(repo, "preflight", "T-1")
    assert "test_other.py::test_other" in pre["failingAtBaseline"] and pre["aboutTask"] == [
        "test_calc.py::test_add", "test_calc.py::test_add_negative"]
    (verdict,) = events_of(repo, "verdict", "T-1")
    assert verdict["outcome"] == "passed" and verdict["parts"]["stillFailing"] == ["test_other.py::test_other"]
    assert committed_files(repo, "T-1") == [["calc.py"]]
    closed = tasks_on_disk(repo)["T-1"]
    assert closed["status"] == "closed" and "still failing, not this task's: test_other.py::test_other" in closed[
        "closeReason"]
    out = capsys.readouterr().out
    assert "preflight: 3 test(s) already failing before any change" in out
    assert ("the task must make them pass: test_calc.py::test_add, test_calc.py::test_add_negative; "
            "not this task's, left alone: test_other.py::test_other") in out

    # T-2 names test_other: a waiver of it does not make a change that fixes nothing pass.
    assert goldenloop(repo, "checks", "waive", "test_other.py::test_other", "--reason", "other is WIP") == 0
    git(repo, "commit", "-qam", "test_other is a known failure")
    assert do_one_task(repo) == 1
    assert committed_files(repo, "T-2") == []
    blocked = tasks_on_disk(repo)["T-2"]
    assert blocked["status"] == "blocked" and blocked["closeReason"].startswith(
        "1 test(s) this task is about still fail, so it is not done: test_other.py::test_other")
    assert "checks waive" not in blocked["closeReason"]


# -- 2. flaky tests -------------------------------------------------------------------------------


def test_a_test_that_passes_on_its_rerun_is_flaky_and_the_attempt_is_committed(
    git_repo: Path, tmp_path: Path, capsys: Capsys
) -> None:
    marker = tmp_path / "busy.marker"
    repo = make_project(
        git_repo, [{"match": "Task T-1", "reply": FIX_ADD}],
        files={"test_stable.py": flaky_tests(marker)},
        config={"testCommands": [f"{PYTEST} test_calc.py test_stable.py"]},
    )

    assert do_one_task(repo) == 0

    assert marker.exists()  # the test did fail once, on the attempt's first run
    (flaky,) = judged(repo)
    assert flaky["outcome"] == "flaky" and "failed, then passed on 2 rerun(s)" in flaky["summary"]
    assert "test_add_is_stable" in flaky["summary"]
    assert kinds(repo).count("attempt_started") == 1
    assert model_calls(repo) == 1 and model_calls(repo, "reflect") == 0
    assert committed_files(repo) == [["calc.py"]]
    assert "FLAKY  flaky: test_stable.py::test_add_is_stable failed, then passed on 2 rerun(s)" in capsys.readouterr().out
    assert "flaky: test_stable.py::test_add_is_stable failed" in tasks_on_disk(repo)["T-1"]["closeReason"]


# -- 3. routing by failure class ------------------------------------------------------------------


def test_a_timeout_is_retried_with_the_time_limit_named_and_reflected_on(
    git_repo: Path, capsys: Capsys
) -> None:
    replies = [
        REFLECT,
        {"match": "killed after the 6 s limit", "reply": write_file("calc.py", CALC_FIXED)},
        {"match": "Task T-1", "reply": write_file("calc.py", CALC_HANG)},
    ]
    # 6 s: the base's run and each verdict's two pytest sessions must end within it on a busy machine
    repo = make_project(git_repo, replies, config={"timeouts": {"verifySeconds": 6}})

    assert do_one_task(repo) == 0

    (timeout,) = judged(repo)
    assert timeout["outcome"] == "timeout" and timeout["summary"].startswith("timeout")
    assert model_calls(repo, "reflect") == 1 and "reflection" in kinds(repo)  # every failure is a lesson
    assert model_calls(repo, "execute") == 2
    assert plan(repo)["subtasks"][0]["attempts"][0]["outcome"] == "timeout"
    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert "TIMEOUT  timeout" in capsys.readouterr().out


def test_an_edit_that_does_not_apply_is_retried_with_the_error_and_no_reflection_call(
    git_repo: Path, capsys: Capsys
) -> None:
    stale = search_replace("calc.py", "    return a - b  # old", "    return a + b")
    replies = [
        REFLECT,
        {"match": r"Attempt 1 could not be applied[\s\S]*edit 1 for calc\.py: SEARCH text not found", "reply": FIX_ADD},
        {"match": "Task T-1", "reply": stale},
    ]
    repo = make_project(git_repo, replies)

    assert do_one_task(repo) == 0

    (failed,) = events_of(repo, "edit_failed")
    assert failed["attempt"] == 1 and "calc.py" in failed["error"]
    # The error says exactly what went wrong: the heuristic reflects on it, no model call.
    assert model_calls(repo, "reflect") == 0 and model_calls(repo, "execute") == 2
    (reflection,) = events_of(repo, "reflection")
    assert reflection["source"] == "heuristic" and "SEARCH lines" in reflection["analysis"]
    assert committed_files(repo) == [["calc.py"]]
    assert "FAIL  reply not applied (asked for whole, got search-replace): edit 1 for calc.py" in capsys.readouterr().out


# -- 4. progress between retries ------------------------------------------------------------------


def test_the_same_failure_twice_is_named_in_the_next_prompt(git_repo: Path, capsys: Capsys) -> None:
    # Different code (a comment apart), the same failure: the fix did not touch the cause.
    reworded = CALC_ABS.replace("def add(a, b):", "def add(a, b):  # sum of both")
    replies = [
        REFLECT,
        {"match": "exactly the failure of the attempt before", "reply": write_file("calc.py", CALC_FIXED)},
        {"match": "Task T-1", "reply": write_file("calc.py", CALC_ABS)},
        {"match": "Task T-1", "reply": write_file("calc.py", reworded)},
    ]
    repo = make_project(git_repo, replies)

    assert do_one_task(repo) == 0

    (progress,) = events_of(repo, "progress")
    assert progress["attempt"] == 2 and progress["repeatedSignature"] is True
    assert progress["action"] == "continue"
    assert "failed exactly as attempt 1 did" in progress["explanation"]
    signatures = [e["errorSignature"] for e in events_of(repo, "verdict")[:2]]
    assert signatures[0] == signatures[1] is not None
    assert kinds(repo).count("attempt_started") == 3
    assert "progress: attempt 2 (score 0.67, 1 failing) did not improve" in capsys.readouterr().out


def test_a_plateau_stops_the_subtask_before_its_last_retry(git_repo: Path, capsys: Capsys) -> None:
    replies = [REFLECT, {"match": "Task T-1", "reply": write_file("calc.py", CALC_ABS), "times": None}]
    repo = make_project(git_repo, replies)

    assert do_one_task(repo) == 1

    assert kinds(repo).count("attempt_started") == 3  # of 4 allowed
    # Retries 2 and 3 gave back attempt 1's code, even when asked again: not tested again.
    assert len(events_of(repo, "verdict")) == 1
    assert [e["action"] for e in events_of(repo, "repeat")] == ["asked again", "counted as a failed attempt"] * 2
    stop = events_of(repo, "progress")[-1]
    assert stop["action"] == "stop" and stop["reason"] == "plateau"
    assert "did not improve on the best score so far (0.67)" in stop["explanation"]
    (escalated,) = events_of(repo, "escalated")
    assert escalated["convergence"] == "plateau"
    blocked = tasks_on_disk(repo)["T-1"]
    assert blocked["status"] == "blocked" and "stopped (plateau) after 3 attempt(s)" in blocked["closeReason"]
    assert "the attempts stopped improving" in packet(repo)
    assert plan(repo)["subtasks"][0]["convergence"] == "plateau"
    assert (repo / "calc.py").read_text() == CALC
    assert "ESCALATED (plateau)" in capsys.readouterr().out


def test_failing_as_two_attempts_before_stops_with_oscillation(git_repo: Path, capsys: Capsys) -> None:
    replies = [
        REFLECT,
        {"match": "Task T-1", "reply": write_file("calc.py", CALC_ZERO)},  # failure A
        {"match": "Task T-1", "reply": write_file("calc.py", CALC_ABS)},  # failure B, better
        # Failure A again: attempt 1's very code, even when asked again.
        {"match": "Task T-1", "reply": write_file("calc.py", CALC_ZERO), "times": 2},
    ]
    repo = make_project(git_repo, replies)

    assert do_one_task(repo) == 1

    assert kinds(repo).count("attempt_started") == 3
    stop = events_of(repo, "progress")[-1]
    assert stop["reason"] == "oscillation"
    assert "attempt 3 failed exactly as attempt 1 did" in stop["explanation"]
    (escalated,) = events_of(repo, "escalated")
    assert escalated["convergence"] == "oscillation"
    assert "stopped (oscillation)" in tasks_on_disk(repo)["T-1"]["closeReason"]
    assert "the attempts went back and forth" in packet(repo)
    assert "ESCALATED (oscillation)" in capsys.readouterr().out


# -- 5. best attempt and regressions --------------------------------------------------------------


def test_a_worse_attempt_is_rolled_back_to_the_best_and_the_packet_keeps_the_best(
    git_repo: Path, capsys: Capsys
) -> None:
    replies = [
        REFLECT,
        # Applies only to attempt 1's tree: proof that attempt 2's worse tree was put back.
        {
            "match": "put back to attempt 1's changes",
            "reply": search_replace("calc.py", "    return abs(a) + abs(b)", "    return a * b"),
        },
        {"match": "Task T-1", "reply": write_file("calc.py", CALC_ABS)},  # 2 of 3 pass: the best
        {"match": "Task T-1", "reply": write_file("calc.py", CALC_ZERO)},  # 1 of 3: a regression
    ]
    repo = make_project(git_repo, replies)

    assert do_one_task(repo) == 1

    rollback = events_of(repo, "progress")[0]
    assert rollback["attempt"] == 2 and rollback["action"] == "rollback"
    assert rollback["reason"] == "regression" and rollback["rollbackTo"] == 1
    (rolled,) = events_of(repo, "rolled_back")
    assert rolled["toAttempt"] == 1
    assert "edit_failed" not in kinds(repo)
    third = events_of(repo, "verdict")[2]
    assert third["filesChanged"] == ["calc.py"] and third["testsFailed"] == 2
    (escalated,) = events_of(repo, "escalated")
    assert escalated["convergence"] == "plateau"  # attempt 3 was no better than attempt 1 either
    # The attempt that stopped the retries is reflected on too: the packet says why it failed.
    assert [e["attempt"] for e in events_of(repo, "reflection")] == [1, 2, 3]
    patch = packet(repo, "patch")
    assert "+    return abs(a) + abs(b)" in patch and "a * b" not in patch and "return 0" not in patch
    assert "Attempt 1 (failed: 1 test(s) the task is about still fail: test_calc.py::test_add_negative" in packet(repo)
    assert "rolled back to attempt 1's tree (the best so far)" in capsys.readouterr().out


# -- 6. what an attempt does to the tests ---------------------------------------------------------


def test_editing_the_failing_test_does_not_make_it_pass_and_the_edit_is_never_committed(
    git_repo: Path, capsys: Capsys
) -> None:
    weaken = search_replace("test_calc.py", "    assert add(2, 3) == 5", "    assert add(2, 3) == -1")
    weaken += search_replace("test_calc.py", "    assert add(-1, -1) == -2", "    assert add(-1, -1) == 0")
    replies = [
        REFLECT,
        # The retry is told its copy of the tests fails the old tests: it puts them back.
        {"match": r"Old tests your copy of the test files fails or skips",
         "reply": write_file("test_calc.py", CALC_TESTS)},
        {"match": r"The old tests were run as they were before the task", "reply": FIX_ADD},
        {"match": "Task T-1", "reply": weaken},
    ]
    repo = make_project(git_repo, replies)

    assert do_one_task(repo) == 0

    first, second, third = events_of(repo, "verdict")
    assert first["outcome"] == "failed" and first["parts"]["aboutFailing"] == [
        "test_calc.py::test_add", "test_calc.py::test_add_negative"]  # the base's tests judged, not the edit
    assert second["outcome"] == "failed" and second["parts"]["lostInCommit"] == [
        "test_calc.py::test_add", "test_calc.py::test_add_negative"]  # the code is right; its copy of the tests is not
    assert third["outcome"] == "passed"
    assert committed_files(repo) == [["calc.py"]]
    assert "== 5" in (repo / "test_calc.py").read_text()
    out = capsys.readouterr().out
    assert "FAIL  failed: 2 test(s) the task is about still fail" in out
    assert "FAIL  failed: 2 old test(s) pass as the base wrote them but fail or are skipped in the attempt's copy" in out


def test_skip_markers_neither_pass_a_test_nor_reach_the_commit(git_repo: Path, capsys: Capsys) -> None:
    marker = '@pytest.mark.skip(reason="flaky")\n'
    imports = "from calc import add, mul"
    skip = search_replace("test_calc.py", imports, f"import pytest\n\n{imports}")
    for name in ("test_add", "test_add_negative"):
        skip += search_replace("test_calc.py", f"def {name}():", f"{marker}def {name}():")
    replies = [
        REFLECT,
        {"match": r"Old tests your copy of the test files fails or skips", "reply": write_file("test_calc.py", CALC_TESTS)},
        {"match": "Task T-1", "reply": skip + FIX_ADD},  # the right fix, with the tests skipped
    ]
    repo = make_project(git_repo, replies)

    assert do_one_task(repo) == 0

    first, second = events_of(repo, "verdict")
    assert first["outcome"] == "failed" and first["parts"]["lostInCommit"] == [
        "test_calc.py::test_add", "test_calc.py::test_add_negative"]
    assert second["outcome"] == "passed"
    assert committed_files(repo) == [["calc.py"]]
    assert "pytest.mark.skip" not in (repo / "test_calc.py").read_text()
    assert "fail or are skipped in the attempt's copy of the tests" in capsys.readouterr().out


def test_a_subtask_about_tests_may_edit_them(git_repo: Path, capsys: Capsys) -> None:
    decomposition = json.dumps(
        {"subtasks": [{"title": "Cover mul with negative numbers", "aboutTests": True,
                       "description": "Add a test that mul(-2, 3) == -6 to test_calc.py."}]}
    )
    new_test = search_replace(
        "test_calc.py",
        "def test_mul():\n    assert mul(3, 4) == 12",
        "def test_mul():\n    assert mul(3, 4) == 12\n\n\n"
        "def test_mul_negative():\n    assert mul(-2, 3) == -6",
    )
    replies = [
        {"match": "Split this coding task", "reply": decomposition},
        {"match": "Task T-1", "reply": new_test},
    ]
    repo = make_project(
        git_repo, replies, files={"calc.py": CALC_FIXED},
        tasks=[task("T-1", "Test mul with negatives", description="Test mul() with a negative factor.", type="test")],
        config={"decomposeMinChars": 1},
    )

    assert do_one_task(repo) == 0

    (decomposed,) = events_of(repo, "decomposed")
    assert decomposed["source"] == "llm"
    assert decomposed["subtasks"][0]["aboutTests"] is True
    assert plan(repo)["subtasks"][0]["aboutTests"] is True
    assert judged(repo) == []
    assert committed_files(repo) == [["test_calc.py"]]
    assert "test_mul_negative" in (repo / "test_calc.py").read_text()
    assert "committed" in capsys.readouterr().out


# -- 7. spending limits per task ------------------------------------------------------------------

USAGE = {"inputTokens": 1000, "outputTokens": 100}  # 2 calls an attempt: 2200 tokens
PRICING = {"inputCostPerToken": 1e-6, "outputCostPerToken": 2e-6}  # $0.0012 a call
# Every call reserves its reply's ceiling before it is made: 100 tokens here.
SHORT_REPLIES = {"maxOutputTokens": 100}


def budget_replies() -> list[dict[str, Any]]:
    # A second attempt would pass: only the budget keeps it from running.
    return [
        {"match": "Failure digest", "reply": REFLECTION, "usage": USAGE},
        {"match": "Task T-1", "reply": WRONG_ADD, "usage": USAGE},
        {"match": "Task T-1", "reply": write_file("calc.py", CALC_FIXED)},
    ]


def assert_stopped_for_budget(repo: Path, reason: str, attempts: int) -> None:
    assert kinds(repo).count("attempt_started") == attempts
    (reopened,) = events_of(repo, "task_reopened")
    assert reopened["convergence"] == "budget" and reopened["reason"].startswith(reason)
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"
    assert plan(repo)["subtasks"][0]["convergence"] == "budget"
    assert (repo / "calc.py").read_text() == CALC
    assert git(repo, "status", "--porcelain", "--", "calc.py") == ""


def test_the_cost_limit_stops_a_task_before_an_attempt_would_overspend(
    git_repo: Path, capsys: Capsys
) -> None:
    repo = make_project(git_repo, budget_replies(), pricing=PRICING,
                        config={"maxCostUsdPerTask": 0.004, **SHORT_REPLIES})

    assert do_one_task(repo) == 1

    assert_stopped_for_budget(repo, "task cost budget: $0.0024 spent of $0.0040", attempts=1)
    assert "the next attempt is estimated at $0.0024" in events_of(repo, "task_reopened")[0]["reason"]
    assert model_calls(repo) == 2
    assert "put T-1 back to open (task cost budget" in capsys.readouterr().out


def test_the_token_limit_stops_a_task_before_an_attempt_would_overspend(
    git_repo: Path, capsys: Capsys
) -> None:
    repo = make_project(git_repo, budget_replies(), config={"maxTokensPerTask": 4000, **SHORT_REPLIES})

    assert do_one_task(repo) == 1

    assert_stopped_for_budget(repo, "task token budget: 2200 of 4000 tokens used", attempts=1)
    assert "put T-1 back to open (task token budget" in capsys.readouterr().out


def test_a_cost_limit_with_an_unknown_price_fails_closed_before_any_call(
    git_repo: Path, capsys: Capsys
) -> None:
    repo = make_project(git_repo, budget_replies(), config={"maxCostUsdPerTask": 1.0})

    assert do_one_task(repo) == 1

    assert model_calls(repo) == 0
    (reopened,) = events_of(repo, "task_reopened")
    assert reopened["convergence"] == "budget" and "price is unknown" in reopened["reason"]
    assert "attempt_started" not in kinds(repo)
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"
    assert "refusing to spend" in capsys.readouterr().out


def spent(repo: Path) -> float:
    return sum(e["costUsd"] for e in events_of(repo, "model_call"))


def test_the_cost_limit_is_never_overspent_when_a_retry_is_much_larger_than_the_first_attempt(
    git_repo: Path, capsys: Capsys
) -> None:
    replies = [
        {"match": "Task T-1", "reply": WRONG_ADD, "usage": {"inputTokens": 500, "outputTokens": 500}},
        # The retry: a far longer prompt and a long reply ($0.04).
        {"match": "Task T-1", "reply": write_file("calc.py", CALC_FIXED),
         "usage": {"inputTokens": 20000, "outputTokens": 2000}},
    ]
    pricing = {"inputCostPerToken": 1e-6, "outputCostPerToken": 1e-5}
    config = {"maxCostUsdPerTask": 0.0225, "maxOutputTokens": 2000, "reflexion": {"enabled": False}}
    repo = make_project(git_repo, replies, pricing=pricing, config=config)

    # Attempt 1 costs $0.0055. Estimated from attempt 1 alone, the retry would fit; its
    # worst case (2000 reply tokens: $0.02, and its prompt) does not.
    assert do_one_task(repo) == 1

    assert_stopped_for_budget(repo, "task cost budget: $0.0055 spent of $0.0225", attempts=1)
    assert spent(repo) == pytest.approx(0.0055) and spent(repo) <= 0.0225
    assert "put T-1 back to open (task cost budget" in capsys.readouterr().out


def test_a_call_the_task_cost_limit_cannot_cover_is_never_made(git_repo: Path, capsys: Capsys) -> None:
    pricing = {"inputCostPerToken": 1e-6, "outputCostPerToken": 1e-5}
    config = {"maxCostUsdPerTask": 0.01, "maxOutputTokens": 2000}  # a reply may cost $0.02
    repo = make_project(git_repo, budget_replies(), pricing=pricing, config=config)

    assert do_one_task(repo) == 1

    assert_stopped_for_budget(repo, "task cost budget: $0.0000 spent of $0.0100", attempts=1)
    assert model_calls(repo) == 0
    (refused,) = events_of(repo, "model_call_refused")
    assert refused["purpose"] == "execute" and refused["reason"] == events_of(repo, "task_reopened")[0]["reason"]
    assert "the next model call may cost up to $0.02" in refused["reason"]
    assert "put T-1 back to open (task cost budget" in capsys.readouterr().out


# -- 8. what the features save --------------------------------------------------------------------

EVERYTHING_OFF = {
    "preflight": False, "flakyReruns": 0, "routeByFailure": False, "stopOnPlateau": False,
    "stopOnOscillation": False, "rollbackRegressions": False,
    "testIntegrity": False, "reaskRepeats": False,
}


def scenario(root: Path, name: str, retry: dict[str, Any]) -> Path:
    """One small repository per scenario; every script entry answers any number of calls."""
    repo = init_repo(root / name)
    fixed = {"match": "Task T-1", "reply": write_file("calc.py", CALC_FIXED), "times": None}
    if name == "environment":
        config = {"testCommands": ["no-such-runner"], "retry": retry}
        return make_project(repo, [REFLECT, fixed], config=config)
    if name == "flaky":
        tests = {"test_stable.py": flaky_tests(root / f"{name}.marker")}
        config = {"testCommands": [f"{PYTEST} test_calc.py test_stable.py"], "retry": retry}
        return make_project(repo, [REFLECT, fixed], files=tests, config=config)
    stuck = {"match": "Task T-1", "reply": write_file("calc.py", CALC_ABS), "times": None}
    return make_project(repo, [REFLECT, stuck], config={"retry": retry})


@pytest.mark.slow
def test_the_features_spend_fewer_model_calls_than_retrying_blindly(tmp_path: Path) -> None:
    calls: dict[str, dict[str, int]] = {}
    for mode, retry in (("on", {}), ("off", EVERYTHING_OFF)):
        for name in ("environment", "flaky", "plateau"):
            repo = scenario(tmp_path / mode, name, retry)
            do_one_task(repo)
            calls.setdefault(name, {})[mode] = model_calls(repo)

    # Measured: environment 0 vs 2, flaky 1 vs 3, plateau 6 vs 7 — 7 model calls instead
    # of 12, i.e. 5 fewer (42%).
    for name, count in calls.items():
        assert count["on"] < count["off"], (name, count)
    assert sum(c["on"] for c in calls.values()) < sum(c["off"] for c in calls.values())


# -- 9. a suite that hangs before any change ------------------------------------------------------

SLOW_TESTS = "import time\n\n\ndef test_slow():\n    time.sleep(60)\n"


def test_a_suite_that_hangs_before_any_change_blocks_the_task_before_any_model_call(
    git_repo: Path, capsys: Capsys
) -> None:
    repo = make_project(
        git_repo, [{"match": "Task T-1", "reply": FIX_ADD, "times": None}],
        files={"test_slow.py": SLOW_TESTS},
        config={"testCommands": [f"{PYTEST} test_calc.py test_slow.py"], "timeouts": {"verifySeconds": 1}},
    )

    assert do_one_task(repo) == 1

    (pre,) = events_of(repo, "preflight")
    assert not pre["passed"] and pre["failingAtBaseline"] == []
    assert "test_slow.py` timed out after 1 s" in (pre.get("environmentError") or "")
    (blocked,) = events_of(repo, "task_blocked")
    assert blocked["convergence"] == "environment" and "No model was called" in blocked["reason"]
    assert model_calls(repo) == 0 and "attempt_started" not in kinds(repo)
    on_disk = tasks_on_disk(repo)["T-1"]
    assert on_disk["status"] == "blocked"
    assert on_disk["closeReason"].startswith("environment: The test command")
    assert "timed out after 1 s (timeouts.verifySeconds) on the untouched tree" in on_disk["closeReason"]
    out = capsys.readouterr().out
    assert "preflight: the checks cannot run: The test command" in out and "already failing" not in out


# -- 10. failures the attempt caused lead; waived ones are marked ---------------------------

CALC_MUL_BROKEN = CALC_FIXED.replace("return a * b", "return a * b + 1")  # add fixed, mul broken
OLD_FIRST = f"{PYTEST} test_other.py test_calc.py"  # the known failure runs, and is listed, first


def test_a_retry_and_its_reflection_lead_with_what_the_attempt_broke_not_a_waived_failure(
    git_repo: Path, capsys: Capsys
) -> None:
    aimed = (
        r"### Why it failed\n```\n"
        r"Broken by this attempt: they did not fail before the task \(fix these first\): test_calc\.py::test_mul\n"
        r"  test_calc\.py:\d+: AssertionError: assert 13 == 12\n"
        r"Failing before the task and not this task's \(leave them alone\): test_other\.py::test_other\n"
    )
    replies = [
        # Answers the retry only when its prompt is aimed at test_mul, and marks test_other.
        {"match": aimed, "reply": write_file("calc.py", CALC_FIXED)},
        {"match": "Task T-1", "reply": write_file("calc.py", CALC_MUL_BROKEN)},
    ]
    repo = make_project(
        git_repo, replies, tasks=[task("T-1", "Fix add", description=ADD_ONLY)],
        files={"other.py": OTHER, "test_other.py": OTHER_TESTS},
        config={"testCommands": [OLD_FIRST], "reflexion": {"maxRetries": 1, "useLLM": False},
                "checks": {"knownFailures": ["test_other.py::test_other"]}},
    )

    assert do_one_task(repo) == 0  # the aimed retry was asked, and fixed mul again

    (pre,) = events_of(repo, "preflight")
    assert "test_other.py::test_other" in pre["failingAtBaseline"]
    first = events_of(repo, "verdict")[0]
    assert first["summary"].startswith("failed: broke 1 test(s) that did not fail before the task: "
                                       "test_calc.py::test_mul "
                                       "(AssertionError: assert 13 == 12)")
    assert first["summary"].endswith("still failing, not this task's: test_other.py::test_other")
    attempt = plan(repo)["subtasks"][0]["attempts"][0]
    assert attempt["summary"] == first["summary"]  # one verdict, in the log and in the plan
    assert attempt["verdict"] == first["parts"] and attempt["verdict"]["broken"] == ["test_calc.py::test_mul"]
    (reflection,) = events_of(repo, "reflection")
    analysis = reflection["analysis"]
    assert analysis.startswith("Test test_calc.py::test_mul failed at test_calc.py:")
    assert "with AssertionError: assert 13 == 12" in analysis
    assert ("test test_other.py::test_other fails too, but it is a known failure from before the task, "
            "not caused by this attempt") in analysis
    assert "the result is off by one (13 vs 12)" in analysis
    assert committed_files(repo) == [["calc.py"]]
    assert (repo / "calc.py").read_text() == CALC_FIXED
    out = capsys.readouterr().out
    assert ("FAIL  failed: broke 1 test(s) that did not fail before the task: test_calc.py::test_mul "
            "(AssertionError") in out
    assert "PASS  passed: 3 tests — pass-to-pass 1, fail-to-pass 2" in out


def test_the_escalation_packet_shows_the_last_failures_error_not_only_its_counts(
    git_repo: Path, capsys: Capsys
) -> None:
    repo = make_project(
        git_repo, [{"match": "Task T-1", "reply": write_file("calc.py", CALC_ABS)}],
        config={"reflexion": {"maxRetries": 0}},
    )

    assert do_one_task(repo) == 1

    last = packet(repo).split("## Last failure", 1)[1].split("## Best attempt", 1)[0]
    assert "failed: 1 test(s) the task is about still fail: test_calc.py::test_add_negative" in last
    assert "(AssertionError: assert 2 == -2)" in last  # the assertion, in its one line
    assert "+  where 2 = add(-1, -1)" in last  # and the error itself, as pytest printed it
    assert "First error: test_calc.py:" in last
    blocked = tasks_on_disk(repo)["T-1"]["closeReason"]
    assert blocked.startswith("1 test(s) this task is about still fail, so it is not done: test_calc.py::test_add_negative")
    assert "subtask T-1.1 stopped (max_retries) after 1 attempt(s)" in blocked
    assert "(AssertionError: assert 2 == -2)" in capsys.readouterr().out
