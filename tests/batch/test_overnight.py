"""overnight end to end: real repositories, real pytest runs, real signals, the scripted model.

Each test runs the command the way a user does (in-process through `overnight_main`, or
as a real process where a signal or a kill is the point) and checks what a user would
find in the morning: the backlog, the commits on main, the summary and the run log.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from projects import (
    CALC,
    FEATURE_TEST_COMMAND,
    FEATURE_TESTS,
    FIX_ADD,
    PY,
    REFLECTION,
    WRONG_ADD,
    git,
    init_repo,
    make_project,
    outcome_lines,
    reflection_lines,
    run_events,
    run_summaries,
    task,
    tasks_on_disk,
    write_file,
)
from test_recovery import git_that_kills_its_caller

from orchestrator.batch.worktree import MergeConflict, Worktrees
from orchestrator.cli import overnight_main
from orchestrator.tempfiles import private_temp
from reflection.scripted import register_scripted_provider

WAIT_S = 60.0  # a guard against a hung child process, never a measurement


def overnight(*args: str | Path) -> int:
    return overnight_main([str(a) for a in args])


def json_summaries(out: str) -> list[dict[str, Any]]:
    """The `summary` lines `--json` prints at the end, one per repository."""
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return [line for line in lines if line["event"] == "summary"]


def outcomes(summary: dict[str, Any]) -> dict[str, str]:
    return {row["taskId"]: row["outcome"] for row in summary["tasks"]}


def subjects(repo: Path) -> list[str]:
    return git(repo, "log", "--format=%s", "main").splitlines()


def on_main(repo: Path, sha: str) -> bool:
    done = subprocess.run(["git", "merge-base", "--is-ancestor", sha, "main"], cwd=repo)
    return done.returncode == 0


def status(repo: Path) -> str:
    return git(repo, "status", "--porcelain", "--untracked-files=all")


def features_project(repo: Path, replies: list[dict[str, Any]], tasks: list[dict], **config: Any) -> Path:
    """A project whose tests judge greet.py, negate.py and clamp.py once they exist."""
    settings = {"testCommands": [FEATURE_TEST_COMMAND], **config}
    return make_project(repo, replies, tasks=tasks, files={"test_features.py": FEATURE_TESTS}, config=settings)


# -- 1. a mixed backlog over two repositories -------------------------------------------------

GREET = 'def hello(name):\n    return "hello " + name\n'
NEGATE_WRONG = "def neg(x):\n    return -abs(x)\n"
NEGATE = "def neg(x):\n    return -x\n"
CLAMP_WRONG = "def clamp(x, lo, hi):\n    return max(x, lo)\n"
NEGATE_REFLECTION = json.dumps(
    {
        "category": "edge_case",
        "analysis": "neg used abs() so neg(-3) returned -3 instead of 3.",
        "suggestion": "Return -x so that negative numbers become positive.",
        "actionItems": ["Drop abs() from neg in negate.py"],
        "confidence": 0.8,
    }
)


@pytest.mark.slow
def test_mixed_backlog_over_two_repositories(tmp_path, capsys):
    # Reflexion on: T-1 passes at once, T-2 passes on a retry that must carry the reflection.
    on = features_project(
        init_repo(tmp_path / "on"),
        [
            {"match": "Task T-1", "reply": write_file("greet.py", GREET)},
            {"match": "Task T-2", "reply": write_file("negate.py", NEGATE_WRONG)},
            {"match": "Failure digest", "reply": NEGATE_REFLECTION},
            {
                "match": r"Attempt 1 failed[\s\S]*Reflections from Previous Attempts[\s\S]*neg used abs\(\)",
                "reply": write_file("negate.py", NEGATE),
            },
        ],
        [task("T-1", "Add greet"), task("T-2", "Add negate")],
    )
    # Reflexion off: T-3 passes on a retry from the raw failure, T-4 escalates, and T-5,
    # which depends on T-4, is never started.
    off = features_project(
        init_repo(tmp_path / "off"),
        [
            {"match": "Task T-3", "reply": write_file("negate.py", NEGATE_WRONG)},
            {
                "match": r"^(?![\s\S]*Reflections from Previous)[\s\S]*Attempt 1 failed[\s\S]*test_negate",
                "reply": write_file("negate.py", NEGATE),
            },
            {"match": "Task T-4", "reply": write_file("clamp.py", CLAMP_WRONG), "times": None},
        ],
        [
            task("T-3", "Add negate"),
            task("T-4", "Add clamp"),
            task("T-5", "Use clamp", deps=[{"id": "T-4", "type": "blocks"}]),
        ],
        reflexion={"enabled": False, "maxRetries": 1},
    )

    assert overnight(on, off, "--json") == 1  # something was blocked

    printed = json_summaries(capsys.readouterr().out)
    files = run_summaries(on) + run_summaries(off)
    assert [s["runId"] for s in printed] == [s["runId"] for s in files]
    by_repo = {Path(s["projectDir"]).name: s for s in files}
    assert outcomes(by_repo["on"]) == {"T-1": "closed", "T-2": "closed"}
    assert outcomes(by_repo["off"]) == {"T-3": "closed", "T-4": "blocked"}  # T-5 is not a row
    assert by_repo["on"]["stopReason"] == "backlog empty" and by_repo["on"]["refused"] is None
    # T-4 blocked and T-5 waiting on it: not an empty backlog, and the summary says so.
    assert by_repo["off"]["stopReason"] == ("no task left ready: 2 not closed, blocked or waiting on a task that "
                                            "is not closed") and by_repo["off"]["refused"] is None
    attempts = {row["taskId"]: row["attempts"] for s in files for row in s["tasks"]}
    assert attempts == {"T-1": 1, "T-2": 2, "T-3": 2, "T-4": 2}

    # Reflections only where reflexion is on, and the retry really used it (else no reply).
    (saved,) = reflection_lines(on)
    assert saved["taskId"] == "T-2" and saved["category"] == "edge_case"
    assert reflection_lines(off) == []
    assert not (off / ".openagents" / "memory" / "reflections.jsonl").exists()

    board_on, board_off = tasks_on_disk(on), tasks_on_disk(off)
    assert board_on["T-1"]["status"] == board_on["T-2"]["status"] == "closed"
    assert board_off["T-3"]["status"] == "closed"
    assert board_off["T-4"]["status"] == "blocked"
    assert "escalations/T-4.md" in board_off["T-4"]["closeReason"]
    assert (off / ".openagents" / "escalations" / "T-4.md").is_file()
    assert board_off["T-5"]["status"] == "open"
    assert not (off / "clamp.py").exists()  # the escalated attempt was undone

    for repo, ids in ((on, ["T-1", "T-2"]), (off, ["T-3"])):
        for task_id in ids:
            (sha,) = tasks_on_disk(repo)[task_id]["commits"]
            assert on_main(repo, sha)
        assert status(repo) == ""
    assert "T-1: Add greet" in subjects(on) and "T-2: Add negate" in subjects(on)
    assert (on / "negate.py").read_text() == NEGATE
    assert "progress.md" in os.listdir(off / ".openagents")
    progress = (off / ".openagents" / "progress.md").read_text()
    assert "Stopped because: no task left ready: 2 not closed" in progress and "T-4" in progress


# -- 2. budgets --------------------------------------------------------------------------------


def test_max_tasks_stops_with_the_second_ready_task_still_open(tmp_path, capsys):
    repo = features_project(
        init_repo(tmp_path / "repo"),
        [
            {"match": "Task T-1", "reply": write_file("greet.py", GREET)},
            {"match": "Task T-2", "reply": write_file("negate.py", NEGATE)},
        ],
        [task("T-1", "Add greet"), task("T-2", "Add negate")],
    )

    assert overnight(repo, "--max-tasks", "1", "--json") == 0

    (summary,) = json_summaries(capsys.readouterr().out)
    assert outcomes(summary) == {"T-1": "closed"}
    assert summary["stopReason"] == "task count reached (1)"
    board = tasks_on_disk(repo)
    assert board["T-1"]["status"] == "closed" and board["T-2"]["status"] == "open"
    assert not (repo / "negate.py").exists()


CLAMP = "def clamp(x, lo, hi):\n    return min(max(x, lo), hi)\n"


@pytest.mark.slow
def test_max_tasks_counts_a_task_when_a_worker_claims_it_so_parallel_workers_start_no_more(tmp_path, capsys):
    repo = features_project(
        init_repo(tmp_path / "repo"),
        [
            {"match": "Task T-1", "reply": write_file("greet.py", GREET)},
            {"match": "Task T-2", "reply": write_file("negate.py", NEGATE)},
            {"match": "Task T-3", "reply": write_file("clamp.py", CLAMP)},
        ],
        [task("T-1", "Add greet"), task("T-2", "Add negate"), task("T-3", "Add clamp")],
    )

    # Both workers start at once: the second must find the one task already claimed.
    assert overnight(repo, "--max-tasks", "1", "--parallel", "2", "--json") == 0

    (summary,) = json_summaries(capsys.readouterr().out)
    assert list(outcomes(summary).values()) == ["closed"]
    assert summary["stopReason"] == "task count reached (1)"
    assert sorted(t["status"] for t in tasks_on_disk(repo).values()) == ["closed", "open", "open"]
    events = run_events(repo)
    assert len([e for e in events if e["event"] == "task_started"]) == 1
    assert len([e for e in events if e["event"] == "model_call"]) == 1
    assert status(repo) == ""


def test_time_budget_cancels_the_attempt_in_flight_and_restores_the_tree(git_repo, tmp_path, capsys):
    register_scripted_provider()  # pay litellm's import before the clock starts
    started = tmp_path / "tests-started"
    slow = f"touch {started} && sleep 4 && {PY} -m pytest -q -p no:cacheprovider test_calc.py"
    # No preflight: the budget must run out in the attempt's own test step.
    config = {"testCommands": [slow], "retry": {"preflight": False}}
    repo = make_project(git_repo, [{"match": "Task T-1", "reply": FIX_ADD}], config=config)

    assert overnight(repo, "--max-hours", "0.0005", "--json") == 1  # 1.8 s; the task is not done

    (summary,) = json_summaries(capsys.readouterr().out)
    assert "time" in summary["stopReason"]
    assert outcomes(summary) == {"T-1": "interrupted"}
    assert started.exists()  # the budget ran out during the test step
    assert (repo / "calc.py").read_text() == CALC
    assert status(repo) == ""
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"
    assert not [e for e in run_events(repo) if e["event"] == "verdict"]


PRICING = {"inputCostPerToken": 0.00001, "outputCostPerToken": 0.00002}
USAGE = {"inputTokens": 800, "outputTokens": 100}  # $0.01 a call


def test_cost_budget_stops_before_an_attempt_that_would_overspend(git_repo, capsys):
    replies = [
        {"match": "Task T-1", "reply": WRONG_ADD, "usage": USAGE},
        {"match": "Task T-1", "reply": FIX_ADD, "usage": USAGE},
    ]
    # Every call reserves its reply's ceiling first: 100 tokens, $0.002.
    repo = make_project(git_repo, replies, pricing=PRICING, config={"maxOutputTokens": 100})

    # Attempt 1 costs $0.01; attempt 2, estimated alike, would reach $0.02 > $0.015.
    assert overnight(repo, "--max-cost", "0.015", "--no-reflexion", "--json") == 1

    (summary,) = json_summaries(capsys.readouterr().out)
    assert summary["stopReason"].startswith("run cost budget")
    (row,) = summary["tasks"]
    assert row["outcome"] == "budget" and row["calls"] == 1
    assert row["costUsd"] == pytest.approx(0.01)
    calls = [e for e in run_events(repo) if e["event"] == "model_call"]
    assert len(calls) == 1 and calls[0]["costUsd"] == pytest.approx(0.01)
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"
    assert (repo / "calc.py").read_text() == CALC
    assert status(repo) == ""


def model_call_costs(repo: Path) -> list[float]:
    return [e["costUsd"] for e in run_events(repo) if e["event"] == "model_call"]


CHEAP_THEN_LARGE = [
    {"match": "Task T-1", "reply": WRONG_ADD, "usage": {"inputTokens": 500, "outputTokens": 500}},
    # The retry: a far longer prompt and a long reply.
    {"match": "Task T-1", "reply": FIX_ADD, "usage": {"inputTokens": 20000, "outputTokens": 2000}},
]
LARGE_PRICING = {"inputCostPerToken": 0.000001, "outputCostPerToken": 0.00001}
# A reply may use 2000 tokens: every call reserves at least $0.02 before it is made.
LARGE_REPLIES = {"maxOutputTokens": 2000}


def test_cost_budget_is_never_overspent_when_a_retry_is_much_larger_than_the_first_attempt(git_repo, capsys):
    repo = make_project(git_repo, CHEAP_THEN_LARGE, pricing=LARGE_PRICING, config=LARGE_REPLIES)

    # Attempt 1 costs $0.0055 and fits (its worst case is about $0.021). Estimated from
    # attempt 1 alone, the retry would fit too, and then cost $0.04; its worst case does not.
    assert overnight(repo, "--max-cost", "0.0225", "--no-reflexion", "--json") == 1

    (summary,) = json_summaries(capsys.readouterr().out)
    assert summary["stopReason"].startswith("run cost budget: $0.0055 spent of $0.0225")
    (row,) = summary["tasks"]
    assert row["outcome"] == "budget" and row["calls"] == 1
    assert model_call_costs(repo) == [pytest.approx(0.0055)]
    assert sum(model_call_costs(repo)) <= 0.0225
    (reopened,) = [e for e in run_events(repo) if e["event"] == "task_reopened"]
    assert reopened["convergence"] == "budget" and reopened["reason"] == summary["stopReason"]
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"
    assert (repo / "calc.py").read_text() == CALC
    assert status(repo) == ""


def test_a_model_call_whose_worst_case_crosses_the_cost_budget_is_never_made(git_repo, capsys):
    repo = make_project(git_repo, CHEAP_THEN_LARGE, pricing=LARGE_PRICING, config=LARGE_REPLIES)

    # Nothing is spent yet, but the first call may cost $0.02: more than the whole budget.
    assert overnight(repo, "--max-cost", "0.01", "--no-reflexion", "--json") == 1

    (summary,) = json_summaries(capsys.readouterr().out)
    assert summary["stopReason"].startswith("run cost budget: $0.0000 spent of $0.0100")
    assert "the next model call may cost up to $0.02" in summary["stopReason"]
    assert [row["outcome"] for row in summary["tasks"]] == ["budget"]
    events = run_events(repo)
    assert model_call_costs(repo) == []
    (refused,) = [e for e in events if e["event"] == "model_call_refused"]
    assert refused["purpose"] == "execute" and refused["worstCostUsd"] > 0.01
    (reopened,) = [e for e in events if e["event"] == "task_reopened"]
    assert reopened["convergence"] == "budget" and reopened["reason"] == summary["stopReason"]
    plan = json.loads((repo / ".openagents" / "subtasks" / "T-1.json").read_text())
    assert [(s["status"], s["convergence"]) for s in plan["subtasks"]] == [("pending", "budget")]
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"
    assert (repo / "calc.py").read_text() == CALC
    assert status(repo) == ""


@pytest.mark.slow
def test_parallel_workers_share_one_cost_ledger(tmp_path, capsys):
    # Each task's one call costs $0.0165 and may cost up to $0.021 (its reply's ceiling);
    # the budget covers one such call, not two. The replies are slow, so both workers'
    # calls would be in flight together.
    usage = {"inputTokens": 500, "outputTokens": 1600}  # $0.0165
    repo = make_project(
        init_repo(tmp_path / "repo"),
        [
            {"match": "Task T-1", "reply": write_file("greet.py", GREET), "usage": usage, "delay": 3},
            {"match": "Task T-2", "reply": write_file("negate.py", NEGATE), "usage": usage, "delay": 3},
        ],
        tasks=[task("T-1", "Add greet"), task("T-2", "Add negate")],
        files={"test_features.py": FEATURE_TESTS},
        config={"testCommands": [FEATURE_TEST_COMMAND], **LARGE_REPLIES},
        pricing=LARGE_PRICING,
    )

    assert overnight(repo, "--max-cost", "0.03", "--parallel", "2", "--json") == 1

    (summary,) = json_summaries(capsys.readouterr().out)
    assert sorted(outcomes(summary).values()) == ["budget", "closed"]
    assert summary["stopReason"].startswith("run cost budget")
    assert len(model_call_costs(repo)) == 1 and sum(model_call_costs(repo)) <= 0.03
    assert status(repo) == ""


def test_cost_budget_with_an_unknown_price_is_refused_before_any_model_call(git_repo, capsys):
    repo = make_project(git_repo, [{"match": "Task T-1", "reply": FIX_ADD}])  # no pricing

    assert overnight(repo, "--max-cost", "1") == 2

    out = capsys.readouterr().out
    assert "refused: a cost budget is set but the price of scripted/" in out
    assert "is unknown" in out
    kinds = {e["event"] for e in run_events(repo)}
    assert "repository_refused" in kinds
    assert not kinds & {"model_call", "model_error", "task_started"}
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"
    assert run_summaries(repo) == []


def test_three_infrastructure_failures_stop_the_run_and_block_nothing(tmp_path, capsys):
    repo = features_project(
        init_repo(tmp_path / "repo"),
        [{"error": "auth", "times": None}],
        [task("T-1", "Add greet"), task("T-2", "Add negate"), task("T-3", "Add clamp")],
    )

    assert overnight(repo, "--json") == 1

    (summary,) = json_summaries(capsys.readouterr().out)
    assert summary["stopReason"].startswith("3 infrastructure failures in a row")
    assert [row["outcome"] for row in summary["tasks"]] == ["model_unavailable"] * 3
    assert {t["status"] for t in tasks_on_disk(repo).values()} == {"open"}
    errors = [e for e in run_events(repo) if e["event"] == "model_error"]
    assert len(errors) == 3 and {e["kind"] for e in errors} == {"auth"}
    assert not (repo / ".openagents" / "escalations").exists()
    assert status(repo) == ""


# -- 3. a killed run is resumed ----------------------------------------------------------------

# A test command that hangs on its Nth run (after saying so with its pid) and runs the
# real tests otherwise; its state lives outside the repository.
SLOW_TESTS = """import os, subprocess, sys, time
from pathlib import Path

state, hang_on = Path(sys.argv[1]), int(sys.argv[2])
counter = state / "count"
runs = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(runs))
if runs == hang_on:
    (state / "pid.tmp").write_text(str(os.getpid()))
    os.replace(state / "pid.tmp", state / "pid")
    time.sleep(60)
sys.exit(subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_calc.py"]))
"""


def slow_test_command(tmp_path: Path, hang_on: int) -> tuple[str, Path]:
    state = tmp_path / "slow-state"
    state.mkdir()
    script = tmp_path / "slow_tests.py"
    script.write_text(SLOW_TESTS)
    return f"{PY} {script} {state} {hang_on}", state


def start_overnight(repo: Path, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "orchestrator.cli", "overnight", str(repo)],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(path: Path, process: subprocess.Popen[str]) -> int:
    """The pid the hanging test command wrote to `path`."""
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        if process.poll() is not None:
            raise AssertionError(f"overnight ended early ({process.returncode}): {process.communicate()}")
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError("the test command never started")
        time.sleep(0.05)
    return int(path.read_text())


def kill_group(pid: int) -> None:
    try:
        os.killpg(os.getpgid(pid), signal.SIGKILL)
    except ProcessLookupError:
        pass


def alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is not running
    except (FileNotFoundError, ProcessLookupError, IndexError):  # gone, or gone while read
        return False


@pytest.mark.slow
def test_a_run_killed_during_the_test_step_resumes_to_completion(git_repo, tmp_path, capsys):
    # The base's run (made at the first verdict: no preflight), attempt 1's, then attempt 2's hangs.
    command, state = slow_test_command(tmp_path, hang_on=3)
    repair = "calc.py\n<<<<<<< SEARCH\n    return abs(a) + abs(b)\n=======\n    return a + b\n>>>>>>> REPLACE\n"
    replies = [
        {"match": "Task T-1", "reply": WRONG_ADD},
        {"match": "Failure digest", "reply": REFLECTION, "times": None},
        {"match": r"Attempt 1 failed[\s\S]*Reflections from Previous Attempts", "reply": repair},
    ]
    # hang_on counts test runs: no preflight run or flaky rerun may shift it.
    plain = {"testCommands": [command], "retry": {"preflight": False, "flakyReruns": 0}}
    repo = make_project(git_repo, replies, config=plain)
    base = git(repo, "rev-parse", "HEAD").strip()

    # Run 1: attempt 1 fails and is reflected on; attempt 2's test run hangs; SIGKILL.
    first = start_overnight(repo, tmp_path)
    hung = wait_for(state / "pid", first)
    first.kill()
    first.communicate(timeout=WAIT_S)
    kill_group(hung)  # SIGKILL leaves the test command's own process group behind

    assert tasks_on_disk(repo)["T-1"]["status"] == "in_progress"
    assert (repo / "calc.py").read_text() == CALC  # attempt 2's edit is in the task's worktree
    judged_in = list(private_temp().glob(f"goldenloop-judge-{first.pid}.*"))
    assert judged_in  # the checks ran in the judge's tree, outside the repository, when the run died
    assert git(repo, "rev-parse", "HEAD").strip() == base
    assert len(reflection_lines(repo)) == 1

    # Run 2, in-process: takes over the lock, removes the dead run's worktree, runs T-1 again.
    assert overnight(repo) == 0

    stale = f"took over a stale lock left by a run that died (pid {first.pid} "
    recovered = "recovered task(s) left in progress by an earlier run: T-1"
    notices = [e["message"] for e in run_events(repo) if e["event"] == "notice"]
    assert any(stale in n for n in notices) and recovered in notices
    out = capsys.readouterr().out  # the log a user reads in the morning says so too
    assert f"note: {stale}" in out and f"note: {recovered}" in out
    closed = tasks_on_disk(repo)["T-1"]
    assert closed["status"] == "closed"
    (sha,) = closed["commits"]
    assert on_main(repo, sha)
    assert git(repo, "show", "--name-only", "--format=", sha).split() == ["calc.py"]
    assert "return a + b" in git(repo, "show", f"{sha}:calc.py")
    assert "abs(" not in (repo / "calc.py").read_text()
    saved = reflection_lines(repo)  # every line still parses; the rerun added its own
    assert len(saved) == 2 and {r["taskId"] for r in saved} == {"T-1"}
    assert status(repo) == ""  # nothing stray: only ignored files are left
    ignored = git(repo, "status", "--porcelain", "--ignored").splitlines()
    assert all(line.startswith("!! ") for line in ignored)
    (summary,) = run_summaries(repo)  # the killed run never got to write one
    assert outcomes(summary) == {"T-1": "closed"} and summary["stopReason"] == "backlog empty"
    assert not any(path.exists() for path in judged_in)  # the dead run's judge's tree, swept by the next


# -- 4. one run per repository -----------------------------------------------------------------

HOLD_LOCK = """import sys
from pathlib import Path
from orchestrator.lock import AgentLock

with AgentLock(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.read()
"""


def test_a_second_run_on_a_locked_repository_is_refused_naming_the_holder(git_repo, capsys):
    repo = make_project(git_repo, [{"match": "Task T-1", "reply": FIX_ADD}])
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(repo)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"

        assert overnight(repo) == 4

        out = capsys.readouterr().out
        assert f"refused: another goldenloop run holds {repo / '.openagents' / 'agent.lock'} (pid {holder.pid} " in out
    finally:
        holder.communicate("", timeout=WAIT_S)
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"
    assert not [e for e in run_events(repo) if e["event"] == "task_started"]
    assert run_summaries(repo) == []


# -- 5. parallel worktrees ---------------------------------------------------------------------


def worktrees(repo: Path) -> list[str]:
    return [line for line in git(repo, "worktree", "list", "--porcelain").splitlines() if line.startswith("worktree ")]


@pytest.mark.slow
def test_parallel_independent_tasks_land_on_main_in_a_linear_history(tmp_path, capsys):
    repo = features_project(
        init_repo(tmp_path / "repo"),
        [
            {"match": "Task T-1", "reply": write_file("greet.py", GREET)},
            {"match": "Task T-2", "reply": write_file("negate.py", NEGATE)},
        ],
        [task("T-1", "Add greet"), task("T-2", "Add negate")],
    )

    assert overnight(repo, "--parallel", "2", "--json") == 0

    (summary,) = json_summaries(capsys.readouterr().out)
    assert outcomes(summary) == {"T-1": "closed", "T-2": "closed"}
    started = [e for e in run_events(repo) if e["event"] == "repository_started"]
    assert started[0]["parallel"] == 2
    board = tasks_on_disk(repo)
    for task_id, path in (("T-1", "greet.py"), ("T-2", "negate.py")):
        (sha,) = board[task_id]["commits"]
        assert on_main(repo, sha)
        assert git(repo, "show", "--name-only", "--format=", sha).split() == [path]
        assert (repo / path).is_file()  # checked out in the main tree
    assert git(repo, "rev-list", "--min-parents=2", "main") == ""  # no merge commits
    assert worktrees(repo) == [f"worktree {repo}"]
    assert not Worktrees(repo.resolve()).home.exists()  # nothing left in the temp dir
    assert git(repo, "branch", "--list", "goldenloop/*") == ""
    assert status(repo) == ""


@pytest.mark.slow
def test_parallel_conflicting_tasks_keep_the_loser_on_its_branch(git_repo, capsys):
    swap = FIX_ADD.replace("return a + b", "return b + a")
    repo = make_project(
        git_repo,
        [{"match": "Task T-1", "reply": FIX_ADD}, {"match": "Task T-2", "reply": swap}],
        tasks=[task("T-1", "Fix add"), task("T-2", "Fix add differently")],
    )

    assert overnight(repo, "--parallel", "2") == 1

    (summary,) = run_summaries(repo)
    assert sorted(outcomes(summary).values()) == ["blocked", "closed"]
    winner = next(t for t, o in outcomes(summary).items() if o == "closed")
    loser = next(t for t, o in outcomes(summary).items() if o == "blocked")
    board = tasks_on_disk(repo)
    assert board[winner]["status"] == "closed" and board[loser]["status"] == "blocked"
    assert board[loser].get("closedAt") is None  # it was never closed on main
    reason = board[loser]["closeReason"]
    assert "merge conflict" in reason and f"goldenloop/{loser}" in reason
    assert f"[{loser}] blocked {loser} after all: merge conflict" in capsys.readouterr().out
    assert git(repo, "branch", "--list", "goldenloop/*").split() == [f"goldenloop/{loser}"]
    mine = "return a + b" if loser == "T-1" else "return b + a"
    assert mine in git(repo, "show", f"goldenloop/{loser}:calc.py")  # kept for a human
    assert mine not in (repo / "calc.py").read_text()
    assert on_main(repo, board[winner]["commits"][0])
    assert worktrees(repo) == [f"worktree {repo}"]
    assert not Worktrees(repo.resolve()).home.exists()  # nothing left in the temp dir
    assert status(repo) == ""


# Two agents that meet before either edits: both tasks start from the same base, whatever the
# machine's speed. T-1 removes util.py, unused so far; T-2 adds double.py, which uses it.
MEETING_AGENT = """set -e
if grep -q "Remove util.py" "$1"; then me=1; other=2; else me=2; other=1; fi
touch "{meet}/$me"
n=0
while [ ! -e "{meet}/$other" ]; do sleep 0.05; n=$((n + 1)); [ "$n" -lt 1200 ] || exit 3; done
if [ "$me" = 1 ]; then rm util.py; exit 0; fi
printf 'from util import twice\n\n\ndef double(x):\n    return twice(x)\n' > double.py
printf 'from double import double\n\n\ndef test_double():\n    assert double(2) == 4\n' > test_double.py
"""


@pytest.mark.slow
def test_parallel_tasks_that_pass_alone_but_fail_together_never_both_close(tmp_path, capsys):
    repo = init_repo(tmp_path / "repo")
    (repo / "util.py").write_text("def twice(x):\n    return 2 * x\n")
    (repo / "test_base.py").write_text("def test_base():\n    assert True\n")
    (repo / ".gitignore").write_text("__pycache__/\n")
    (tmp_path / "meet").mkdir()
    agent = tmp_path / "agent.sh"
    agent.write_text(MEETING_AGENT.format(meet=tmp_path / "meet"))
    meta = repo / ".openagents"
    meta.mkdir()
    tasks = [task("T-1", "Remove util.py", description="Nothing uses util.py: remove it.", type="chore"),
             task("T-2", "Add double", description="Add double(x) in double.py, with a test.", type="feature")]
    (meta / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    (meta / "project.json").write_text(json.dumps({
        "testCommands": [f"{PY} -m pytest -q -p no:cacheprovider"], "decomposeMinChars": 0,
        "executor": {"kind": "command", "command": f"sh {agent} {{prompt_file}}", "writable": [str(tmp_path / "meet")]},
        "reflexion": {"maxRetries": 0, "useLLM": False}}))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a util, a test and the backlog")

    assert overnight(repo, "--parallel", "2") == 1

    board = tasks_on_disk(repo)
    assert sorted(t["status"] for t in board.values()) == ["blocked", "closed"]
    loser = next(t for t in board if board[t]["status"] == "blocked")
    reason = board[loser]["closeReason"]
    assert reason.startswith("its checks passed on the tree it started from, but fail with the tasks that "
                             "landed on main since")
    assert f"kept on branch goldenloop/{loser}" in reason and board[loser].get("closedAt") is None
    assert f"[{loser}] blocked {loser} after all: its checks passed" in capsys.readouterr().out
    assert git(repo, "branch", "--list", "goldenloop/*").split() == [f"goldenloop/{loser}"]
    done = subprocess.run([PY, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=repo, capture_output=True,
                          env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert done.returncode == 0, done.stdout  # main passes its checks: what closed is done
    assert status(repo) == ""


def test_a_worker_worktree_is_reset_to_the_new_base_for_each_task_and_merged_linearly(tmp_path):
    repo = init_repo(tmp_path / "repo")
    trees = Worktrees(repo.resolve())
    first, second = trees.add("worker-1"), trees.add("worker-2")
    try:
        trees.start(first, "T-1", trees.head())
        trees.start(second, "T-2", trees.head())
        for tree, name in ((first, "a.py"), (second, "b.py")):
            (tree.path / name).write_text("x = 1\n")
            git(tree.path, "add", name)
            git(tree.path, "commit", "-q", "-m", f"{tree.task_id}: add {name}")
        (one,) = trees.integrate(first)
        (two,) = trees.integrate(second)  # made again on top of T-1's commit
        assert git(repo, "rev-list", "--reverse", "HEAD~2..HEAD").split() == [one, two]
        assert git(repo, "rev-list", "--min-parents=2", "main") == ""

        # The next task starts from the new base, whatever the last one left in the tree.
        (first.path / "a.py").write_text("edited\n")
        (first.path / "junk.txt").write_text("untracked\n")
        (first.path / "__pycache__").mkdir()
        git(first.path, "commit", "-q", "--allow-empty", "-m", "left behind")
        trees.start(first, "T-3", trees.head())
        assert git(first.path, "rev-parse", "HEAD").strip() == two
        assert git(first.path, "status", "--porcelain", "--ignored") == ""
        assert (first.path / "a.py").read_text() == "x = 1\n" and (first.path / "b.py").is_file()

        # A conflict keeps the task's own commit on its branch; main does not move.
        trees.start(second, "T-4", one)  # as if it started before T-2 landed
        (second.path / "b.py").write_text("y = 2\n")
        git(second.path, "add", "b.py")
        git(second.path, "commit", "-q", "-m", "T-4: other b.py")
        with pytest.raises(MergeConflict, match="goldenloop/T-4"):
            trees.integrate(second)
        assert git(repo, "rev-parse", "HEAD").strip() == two
        assert git(repo, "show", "goldenloop/T-4:b.py") == "y = 2\n"
        assert git(repo, "branch", "--list", "goldenloop/*").split() == ["goldenloop/T-4"]
    finally:
        trees.remove(first)
        trees.remove(second)
    assert worktrees(repo) == [f"worktree {repo}"]
    assert not trees.home.exists()


def test_a_task_of_two_commits_lands_both_in_order_on_a_branch_that_moved(tmp_path):
    repo = init_repo(tmp_path / "repo")
    trees = Worktrees(repo.resolve())
    tree = trees.add("worker-1")
    try:
        trees.start(tree, "T-1", trees.head())
        for name in ("a.py", "b.py"):
            (tree.path / name).write_text("x = 1\n")
            git(tree.path, "add", name)
            git(tree.path, "commit", "-q", "-m", f"T-1: add {name}")
        (repo / "c.py").write_text("landed first\n")
        git(repo, "add", "c.py")
        git(repo, "commit", "-q", "-m", "another task landed first")
        tip = git(repo, "rev-parse", "HEAD").strip()
        landed = trees.integrate(tree)  # two commits: rebased, not made again one by one
        assert [git(repo, "show", "-s", "--format=%s", sha).strip() for sha in landed] == ["T-1: add a.py",
                                                                                        "T-1: add b.py"]
        assert git(repo, "rev-parse", f"{landed[0]}^").strip() == tip
        assert git(repo, "rev-parse", "HEAD").strip() == landed[-1] and (repo / "b.py").is_file()
    finally:
        trees.remove(tree)


# -- 6. interrupted by the user ----------------------------------------------------------------


def test_sigint_puts_the_task_back_and_prints_the_summary(git_repo, tmp_path):
    command, state = slow_test_command(tmp_path, hang_on=1)
    plain = {"testCommands": [command], "retry": {"preflight": False, "flakyReruns": 0}}
    repo = make_project(git_repo, [{"match": "Task T-1", "reply": FIX_ADD}], config=plain)

    run = start_overnight(repo, tmp_path)
    hung = wait_for(state / "pid", run)
    assert (repo / "calc.py").read_text() == CALC  # the attempt is in its worktree, never here
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=WAIT_S)

    assert run.returncode == 130, err
    assert "Traceback" not in err
    assert "stopped because interrupted" in out
    assert "interrupted: the tasks in flight were put back to open" in out
    assert not alive(hung)  # the test command's whole group was stopped
    assert (repo / "calc.py").read_text() == CALC
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"
    # Only the backlog's own state may be left uncommitted by an interrupt.
    assert [line for line in status(repo).splitlines() if ".openagents/" not in line] == []
    (summary,) = run_summaries(repo)
    assert summary["stopReason"] == "interrupted" and summary["tasks"] == []
    kinds = [e["event"] for e in run_events(repo)]
    assert "task_reopened" in kinds and kinds[-1] == "run_stopped"


# The base's run passes (two tasks from one base share it); each task's own run hangs.
HANG = """import os, sys, time
from pathlib import Path

if Path("greet.py").exists() or Path("negate.py").exists():
    (Path(sys.argv[1]) / str(os.getpid())).write_text(os.getcwd())
    time.sleep(60)
"""


def two_tasks_whose_checks_hang(tmp_path: Path, state: Path, *, replies_again: bool = False) -> Path:
    """T-1 and T-2, whose test command is `hang.py` (written by the caller) told `state`."""
    again = {"times": None} if replies_again else {}  # a resumed run asks the model again
    return features_project(
        init_repo(tmp_path / "repo"),
        [{"match": "Task T-1", "reply": write_file("greet.py", GREET), **again},
         {"match": "Task T-2", "reply": write_file("negate.py", NEGATE), **again}],
        [task("T-1", "Add greet"), task("T-2", "Add negate")],
        testCommands=[f"{PY} {tmp_path / 'hang.py'} {state}"], retry={"preflight": False, "flakyReruns": 0},
    )


def start_two_workers(repo: Path, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "overnight", "--parallel", "2", str(repo)],
                            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_sigint_with_two_workers_on_loops_of_their_own_puts_both_tasks_back(tmp_path):
    """Each worker runs on an event loop of its own thread: an interrupt still reaches
    both, and each puts its task back before the run ends."""
    state = tmp_path / "hung"
    state.mkdir()
    (tmp_path / "hang.py").write_text(HANG)
    repo = two_tasks_whose_checks_hang(tmp_path, state)
    base = git(repo, "rev-parse", "HEAD").strip()
    run = start_two_workers(repo, tmp_path)
    deadline = time.monotonic() + WAIT_S
    while len(list(state.iterdir())) < 2:  # both workers' test commands hang
        assert run.poll() is None, run.communicate()
        if time.monotonic() > deadline:
            run.kill()
            raise AssertionError("the two test commands never ran at once")
        time.sleep(0.05)
    hung = [int(p.name) for p in state.iterdir()]
    assert len({p.read_text() for p in state.iterdir()}) == 2  # in two worktrees
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=WAIT_S)

    assert run.returncode == 130, err
    assert "Traceback" not in err
    assert "Task was destroyed" not in err  # nothing left pending on a worker's closed loop
    assert "interrupted: the tasks in flight were put back to open" in out
    assert not any(alive(pid) for pid in hung)
    board = tasks_on_disk(repo)
    assert board["T-1"]["status"] == board["T-2"]["status"] == "open"
    assert git(repo, "rev-list", f"{base}..main", "--", "greet.py", "negate.py") == ""  # nothing merged
    assert not (repo / "greet.py").exists() and not (repo / "negate.py").exists()
    assert [line for line in status(repo).splitlines() if ".openagents/" not in line] == []
    assert worktrees(repo) == [f"worktree {repo}"]
    assert not Worktrees(repo.resolve()).home.exists()
    reopened = [e["taskId"] for e in run_events(repo) if e["event"] == "task_reopened"]
    assert sorted(reopened) == ["T-1", "T-2"]


def assert_each_task_landed_once(repo: Path, base: str) -> None:
    """T-1's greet.py and T-2's negate.py each on main in the one commit its task names,
    in a linear history, with no worktree left."""
    board = tasks_on_disk(repo)
    for task_id, path in (("T-1", "greet.py"), ("T-2", "negate.py")):
        (sha,) = board[task_id]["commits"]
        assert on_main(repo, sha)
        assert git(repo, "log", "--format=%H", f"{base}..main", "--", path).split() == [sha]  # landed once
    assert git(repo, "rev-list", "--min-parents=2", "main") == ""
    assert worktrees(repo) == [f"worktree {repo}"]


# The base's run passes (two tasks from one base share it); each task's own run hangs.
HANG_WHILE_ARMED = """import os, sys, time
from pathlib import Path

state = Path(sys.argv[1])
if (state / "armed").exists() and (Path("greet.py").exists() or Path("negate.py").exists()):
    (state / str(os.getpid())).write_text(os.getcwd())
    time.sleep(60)
"""


@pytest.mark.slow
def test_two_workers_killed_in_their_test_steps_resume_with_each_task_landed_once(tmp_path, capsys):
    state = tmp_path / "hung"
    state.mkdir()
    (state / "armed").write_text("")
    (tmp_path / "hang.py").write_text(HANG_WHILE_ARMED)
    repo = two_tasks_whose_checks_hang(tmp_path, state, replies_again=True)
    base = git(repo, "rev-parse", "HEAD").strip()
    first = start_two_workers(repo, tmp_path)
    deadline = time.monotonic() + WAIT_S
    while len([p for p in state.iterdir() if p.name != "armed"]) < 2:
        assert first.poll() is None, first.communicate()
        if time.monotonic() > deadline:
            first.kill()
            raise AssertionError("the two test commands never ran at once")
        time.sleep(0.05)
    first.kill()
    first.communicate(timeout=WAIT_S)
    for pid in [int(p.name) for p in state.iterdir() if p.name != "armed"]:
        kill_group(pid)  # SIGKILL leaves the test commands' own process groups behind
    (state / "armed").unlink()
    board = tasks_on_disk(repo)
    assert board["T-1"]["status"] == board["T-2"]["status"] == "in_progress"
    assert git(repo, "rev-parse", "HEAD").strip() == base

    assert overnight(repo, "--parallel", "2", "--json") == 0

    (summary,) = json_summaries(capsys.readouterr().out)
    assert outcomes(summary) == {"T-1": "closed", "T-2": "closed"}
    assert_each_task_landed_once(repo, base)
    assert git(repo, "branch", "--list", "goldenloop/*") == ""
    assert status(repo) == ""


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--parallel", "0", "--parallel: must be 1 or more, not 0"),
        ("--max-hours", "-1", "--max-hours: must be more than 0, not -1"),
        ("--max-tasks", "0", "--max-tasks: must be 1 or more, not 0"),
        ("--max-cost", "ten", "--max-cost: 'ten' is not a number"),
        ("--max-retries", "-1", "--max-retries: must be 0 or more, not -1"),
    ],
)
def test_a_budget_out_of_range_is_refused_in_one_line_before_anything_runs(
    git_repo, capsys, flag, value, message
):
    repo = make_project(git_repo, [{"reply": FIX_ADD}])
    before = (repo / ".openagents" / "tasks.jsonl").read_text()

    with pytest.raises(SystemExit) as exited:
        overnight(repo, flag, value)

    assert exited.value.code == 2
    assert message in capsys.readouterr().err
    assert (repo / ".openagents" / "tasks.jsonl").read_text() == before


def test_a_repository_the_task_budget_never_reached_is_named_in_the_summary(tmp_path, capsys):
    greet = [{"match": "Task T-1", "reply": write_file("greet.py", GREET)}]
    first = features_project(init_repo(tmp_path / "one"), greet,
                             [task("T-1", "Add greet")])
    second = features_project(init_repo(tmp_path / "two"), [], [task("T-1", "Add greet")])

    assert overnight(first, second, "--max-tasks", "1") == 0

    out = capsys.readouterr().out
    assert f"{second}: not started: task count reached (1)" in out
    assert tasks_on_disk(second)["T-1"]["status"] == "open"


MEET = '''import pathlib
import time

import meet  # the attempt writes it: before that, nothing waits

SHARED = pathlib.Path({shared!r})


def test_both_repositories_run_at_once():
    (SHARED / {me!r}).write_text("here")
    deadline = time.monotonic() + 30  # a guard, never a measurement: the other test arrives or it fails
    while not (SHARED / {other!r}).exists():
        assert time.monotonic() < deadline, "the other repository's task never ran at the same time"
        time.sleep(0.05)
'''


@pytest.mark.slow
def test_parallel_runs_repositories_at_the_same_time(tmp_path, capsys):
    """Each repository's test passes only while the other's runs: one after the other, both fail."""
    shared = tmp_path / "meeting-point"
    shared.mkdir()
    repos = []
    for me, other in (("a", "b"), ("b", "a")):
        repos.append(make_project(
            init_repo(tmp_path / me), [{"match": "Task T-1", "reply": write_file("meet.py", "HERE = True\n")}],
            files={"test_meet.py": MEET.format(shared=str(shared), me=me, other=other)},
            config={"testCommands": [f"{PY} -m pytest -q -p no:cacheprovider test_meet.py"],
                    "retry": {"preflight": False}, "reflexion": {"maxRetries": 0, "useLLM": False}},
        ))

    assert overnight(*repos, "--parallel", "2", "--json") == 0

    out = capsys.readouterr().out
    summaries = json_summaries(out)
    assert sorted(outcomes(s)["T-1"] for s in summaries) == ["closed", "closed"]
    assert all(status(repo) == "" for repo in repos)
    closed = [json.loads(line) for line in out.splitlines() if '"task_closed"' in line]
    assert sorted(e["repo"] for e in closed) == ["a", "b"]  # both say whose T-1 they are


BUILD_INPUTS = '''import pathlib


def test_the_build_inputs_git_does_not_carry_are_there():
    assert pathlib.Path(".venv/marker.txt").read_text() == "the venv"
    assert pathlib.Path(".env").read_text() == "API_URL=http://localhost"
'''


@pytest.mark.slow
def test_parallel_worktrees_get_the_venv_linked_and_the_env_file_copied(tmp_path, capsys):
    repo = make_project(
        init_repo(tmp_path / "repo"),
        [{"match": "Task T-1", "reply": write_file("greet.py", GREET)},
         {"match": "Task T-2", "reply": write_file("negate.py", NEGATE)}],
        tasks=[task("T-1", "Add greet", type="chore"), task("T-2", "Add negate", type="chore")],
        files={"test_inputs.py": BUILD_INPUTS},
        config={"testCommands": [f"{PY} -m pytest -q -p no:cacheprovider test_inputs.py"],
                "reflexion": {"maxRetries": 0, "useLLM": False}},
    )
    (repo / ".gitignore").write_text((repo / ".gitignore").read_text() + ".venv/\n.env\n")
    git(repo, "commit", "-qam", "ignore the build inputs")
    (repo / ".venv").mkdir()
    (repo / ".venv" / "marker.txt").write_text("the venv")
    (repo / ".env").write_text("API_URL=http://localhost")

    assert overnight(repo, "--parallel", "2", "--json") == 0

    (summary,) = json_summaries(capsys.readouterr().out)
    assert outcomes(summary) == {"T-1": "closed", "T-2": "closed"}
    assert (repo / ".venv" / "marker.txt").read_text() == "the venv"  # removing the worktrees kept yours
    assert (repo / ".env").read_text() == "API_URL=http://localhost"
    assert status(repo) == ""


def test_the_night_stops_when_task_after_task_cannot_run_for_the_same_reason(
    git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Every task's checks need a program that is not installed: each task is blocked
    # before any model call, and a night of them would block the whole backlog.
    repo = make_project(git_repo, [], tasks=[task(f"T-{n}", f"Task {n}") for n in range(1, 6)],
                        config={"testCommands": ["no-such-test-runner --all"]})

    assert overnight(repo, "--json") == 1

    (summary,) = json_summaries(capsys.readouterr().out)
    assert outcomes(summary) == {"T-1": "blocked", "T-2": "blocked", "T-3": "blocked"}
    assert summary["stopReason"].startswith("3 tasks in a row could not run for the same reason; the last: "
                                            "environment: The test command `no-such-test-runner --all`")
    assert {t: tasks_on_disk(repo)[t]["status"] for t in ("T-4", "T-5")} == {"T-4": "open", "T-5": "open"}
    assert outcome_lines(repo) == []  # nothing to learn about code from a missing program


@pytest.mark.slow
@pytest.mark.parametrize("when", ["merge-tree*", "commit-tree*", r"merge\ --ff-only*"])
def test_a_parallel_run_killed_while_a_task_lands_leaves_no_false_close(tmp_path, capsys, when):
    """SIGKILL right after the replay's merge of trees, its new commit, or the merge onto
    main: a task its worker had closed in its worktree is closed only if its commits are on
    main, and the next run lands each task on main exactly once (it once said "backlog
    empty" with a closed task's work nowhere on main)."""
    repo = features_project(
        init_repo(tmp_path / "repo"),
        [{"match": "Task T-1", "reply": write_file("greet.py", GREET), "times": None},
         {"match": "Task T-2", "reply": write_file("negate.py", NEGATE), "times": None}],
        [task("T-1", "Add greet"), task("T-2", "Add negate")],
    )
    base = git(repo, "rev-parse", "HEAD").strip()
    first = subprocess.run([sys.executable, "-m", "orchestrator.cli", "overnight", "--parallel", "2", str(repo)],
                           cwd=tmp_path, capture_output=True, text=True, timeout=WAIT_S, check=False,
                           env={**os.environ, "PATH": git_that_kills_its_caller(tmp_path, when)})
    assert first.returncode == -signal.SIGKILL, first.stderr
    landed = git(repo, "log", "--format=%s", f"{base}..main").splitlines()
    assert len(landed) <= 1  # the first task at most: the second was being made again
    assert [line for line in status(repo).splitlines() if ".openagents/" not in line] == []

    assert overnight(repo, "--parallel", "2", "--json") == 0

    board = tasks_on_disk(repo)
    assert {board["T-1"]["status"], board["T-2"]["status"]} == {"closed"}
    assert_each_task_landed_once(repo, base)
