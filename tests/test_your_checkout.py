"""Your checkout is yours: an attempt runs in a worktree of its own, and your checkout
changes only when a task lands, never where you changed a file meanwhile.

Each test drives the real command line (`do-one-task`, `overnight`) on a real repository,
with an agent command that fixes the bug in its worktree while the test plays the user.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from projects import CALC, do_one_task, git, make_project, tasks_on_disk

PY = sys.executable
WAIT_S = 60
FIXED = CALC.replace("a - b", "a + b")

# Fixes calc.py (and adds a module when asked), says it is under way, and waits for the
# test's go before it ends: the user works meanwhile.
AGENT = """import pathlib, sys, time
state, fixed, extra = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
pathlib.Path("calc.py").write_text(fixed.read_text())
if extra != "-":
    pathlib.Path(extra).write_text("def helper():\\n    return 1\\n")
(state / "started").write_text("yes")
deadline = time.monotonic() + 120
while not (state / "go").exists() and time.monotonic() < deadline:
    time.sleep(0.02)
"""


def project(git_repo: Path, tmp_path: Path, extra: str = "-") -> tuple[Path, Path]:
    state = tmp_path / "agent-state"
    state.mkdir()
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "fixed.txt").write_text(FIXED)
    command = f"{PY} {tmp_path / 'agent.py'} {state} {tmp_path / 'fixed.txt'} {extra} {{prompt_file}}"
    config = {"executor": {"kind": "command", "command": command}, "reflexion": {"useLLM": False}}
    return make_project(git_repo, [], config=config), state


def run_in_background(repo: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([PY, "-m", "orchestrator.cli", *args, "--dir", str(repo)] if args[0] == "do-one-task"
                            else [PY, "-m", "orchestrator.cli", *args, str(repo)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for(path: Path, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        if process.poll() is not None:
            raise AssertionError(f"the run ended early ({process.returncode}): {process.communicate()[0]}")
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


def test_a_file_you_change_while_the_task_runs_keeps_the_task_on_its_branch(git_repo: Path, tmp_path: Path) -> None:
    repo, state = project(git_repo, tmp_path)
    run = run_in_background(repo, "do-one-task", "--allow-dirty")
    wait_for(state / "started", run)
    assert (repo / "calc.py").read_text() == CALC  # the agent's fix is in its worktree
    mine = CALC + "\n# my own note, written while the task ran\n"
    (repo / "calc.py").write_text(mine)
    (state / "go").write_text("")
    out, _ = run.communicate(timeout=WAIT_S * 2)

    assert run.returncode == 1, out
    assert (repo / "calc.py").read_text() == mine  # neither committed nor reverted
    task = tasks_on_disk(repo)["T-1"]
    assert task["status"] == "blocked"
    assert task["closeReason"].startswith("your uncommitted change to calc.py is in the way of the task's commits, "
                                          "which are kept on branch goldenloop/T-1: `git stash`, then "
                                          "`git cherry-pick HEAD..goldenloop/T-1`, then `git stash pop`")
    assert "your uncommitted change to calc.py is in the way" in out
    assert git(repo, "show", "goldenloop/T-1:calc.py") == FIXED
    assert git(repo, "show", "HEAD:calc.py") == CALC
    # What the sentence says works: the fix lands, and your note comes back on top of it.
    git(repo, "stash", "-q")
    git(repo, "cherry-pick", "HEAD..goldenloop/T-1")
    git(repo, "stash", "pop", "-q")
    assert (repo / "calc.py").read_text() == FIXED + "\n# my own note, written while the task ran\n"
    git(repo, "commit", "-qam", "my note")

    # The next run sees the task's work on your branch: closed, its branch gone.
    assert do_one_task(repo) == 3  # no ready task left
    closed = tasks_on_disk(repo)["T-1"]
    assert closed["status"] == "closed"
    assert closed["closeReason"] == "its commits, kept on goldenloop/T-1, are on your branch"
    (sha,) = closed["commits"]
    assert git(repo, "show", "-s", "--format=%s", sha).strip() == "T-1: Fix add"
    assert git(repo, "merge-base", "--is-ancestor", sha, "HEAD") == ""
    assert git(repo, "branch", "--list", "goldenloop/*") == ""


def test_a_file_you_create_where_the_task_creates_one_is_never_overwritten(git_repo: Path, tmp_path: Path) -> None:
    repo, state = project(git_repo, tmp_path, extra="helper.py")
    run = run_in_background(repo, "do-one-task")
    wait_for(state / "started", run)
    (repo / "helper.py").write_text("# my own helper\n")
    (state / "go").write_text("")
    out, _ = run.communicate(timeout=WAIT_S * 2)

    assert run.returncode == 1, out
    assert (repo / "helper.py").read_text() == "# my own helper\n"
    reason = tasks_on_disk(repo)["T-1"]["closeReason"]
    assert reason == ("your untracked file helper.py is in the way of the task's commits, which are kept on branch "
                      "goldenloop/T-1: move it away, then `git cherry-pick HEAD..goldenloop/T-1`")

    (repo / "helper.py").rename(tmp_path / "my-helper.py")  # moved away; merged rather than picked
    git(repo, "merge", "-q", "--no-edit", "goldenloop/T-1")
    assert do_one_task(repo) == 3
    closed = tasks_on_disk(repo)["T-1"]
    assert closed["status"] == "closed"
    (sha,) = closed["commits"]
    assert git(repo, "show", "--name-only", "--format=", sha).split() == ["calc.py", "helper.py"]
    assert git(repo, "branch", "--list", "goldenloop/*") == ""


def test_a_killed_parallel_run_and_the_next_one_leave_your_work_in_place(git_repo: Path, tmp_path: Path) -> None:
    # kill -9 of `overnight --parallel 2 --allow-dirty` while an agent works, then a rerun.
    repo, state = project(git_repo, tmp_path)
    (repo / "README.md").write_bytes(b"my uncommitted edit\r\n")
    (repo / "notes.txt").write_bytes(b"my untracked notes\n")
    run = run_in_background(repo, "overnight", "--parallel", "2", "--allow-dirty")
    wait_for(state / "started", run)
    os.kill(run.pid, signal.SIGKILL)
    run.communicate(timeout=WAIT_S)
    assert (repo / "README.md").read_bytes() == b"my uncommitted edit\r\n"
    assert (repo / "notes.txt").read_bytes() == b"my untracked notes\n"
    assert (repo / "calc.py").read_text() == CALC

    (state / "go").write_text("")  # the rerun's agent need not wait
    assert do_one_task(repo, "--allow-dirty") == 0
    assert (repo / "README.md").read_bytes() == b"my uncommitted edit\r\n"
    assert (repo / "notes.txt").read_bytes() == b"my untracked notes\n"
    assert (repo / "calc.py").read_text() == FIXED  # landed: a file you had not changed
    assert not (repo / ".openagents" / "recovered").exists()
    assert git(repo, "status", "--porcelain").split("\n")[:2] == [" M README.md", "?? notes.txt"]
