"""A real `do-one-task` process killed with SIGKILL at the dangerous moment, then run again.

The agent is a command executor (a small script outside the repository) that edits the
tree like an agent would and then hangs, so the kill lands mid-attempt every time. After
the kill the user works on; the rerun must undo only what the killed attempt did.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from projects import CALC, FIX_ADD, WRONG_ADD, do_one_task, git, make_project, reflection_lines, tasks_on_disk

pytestmark = pytest.mark.slow
PY = sys.executable
WAIT_S = 60
FIXED = CALC.replace("a - b", "a + b")

AGENT = """import os, pathlib, sys, time
state, mode = pathlib.Path(sys.argv[1]), sys.argv[2]
runs = state / "runs"
n = int(runs.read_text()) + 1 if runs.exists() else 1
runs.write_text(str(n))
if n > 1:
    pathlib.Path("calc.py").write_text(pathlib.Path(sys.argv[3]).read_text())
    sys.exit(0)
pathlib.Path("calc.py").write_text("def add(a, b):\\n    return 0  # half-way\\n")
pathlib.Path("agent_scratch.md").write_text("the agent's notes\\n")
if mode == "overwrite":
    pathlib.Path("README.md").write_text("the agent rewrote this\\n")
if mode == "delete":
    pathlib.Path("README.md").unlink()
if mode == "escape" and os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        (state / "escapee").write_text(str(os.getpid()))
        while True:
            time.sleep(0.1)
    os._exit(0)
(state / "agent").write_text(str(os.getpid()))
time.sleep(300)
"""


def agent_project(git_repo: Path, tmp_path: Path, mode: str = "plain") -> tuple[Path, Path]:
    state = tmp_path / "agent-state"
    state.mkdir()
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    fixed = tmp_path / "fixed.txt"
    fixed.write_text(FIXED)
    template = f"{PY} {script} {state} {mode} {fixed} {{prompt_file}}"
    config = {"executor": {"kind": "command", "command": template},
              "retry": {"preflight": False}, "reflexion": {"useLlm": False}}
    return make_project(git_repo, [], config=config), state


def start(repo: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([PY, "-m", "orchestrator.cli", "do-one-task", "--dir", str(repo), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def wait_for(path: Path, process: subprocess.Popen[str]) -> int:
    deadline = time.monotonic() + WAIT_S
    while not path.exists() or not path.read_text():
        if process.poll() is not None:
            raise AssertionError(f"do-one-task ended early ({process.returncode}): {process.communicate()}")
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.05)
    return int(path.read_text())


def kill(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=WAIT_S)


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):  # gone, or gone while read
        return False


def git_that_kills_its_caller(tmp_path: Path, when: str, *, before: bool = False) -> str:
    """A PATH whose `git` SIGKILLs goldenloop right after a command whose arguments (after
    git's own options, `-c name=value` included) match the shell pattern `when` and that works on the user's index
    (not a scratch one) has run (`before`: instead of running it): the kill lands between
    two steps, every time."""
    wrapper = tmp_path / "bin"
    wrapper.mkdir()
    real_git = subprocess.run(["which", "git"], capture_output=True, text=True, check=True).stdout.strip()
    (wrapper / "git").write_text(
        '#!/bin/sh\ncmd="$*"\nwhile :; do case "$cmd" in --*) cmd="${cmd#* }";; "-c "*) cmd="${cmd#* * }";; '
        '*) break;; esac; done\n'
        f'case "$cmd" in {when}) [ -z "$GIT_INDEX_FILE" ] && {{ {":" if before else real_git} "$@"; '
        'kill -9 $PPID; exit 1; };; '
        f'esac\nexec {real_git} "$@"\n')
    (wrapper / "git").chmod(0o755)
    return f"{wrapper}:{os.environ['PATH']}"


def checkout_files(repo: Path) -> dict[str, bytes]:
    """Every file of the checkout outside .git and .openagents, with its bytes."""
    skipped = {".git", ".openagents", "__pycache__", ".pytest_cache"}
    return {str(p.relative_to(repo)): p.read_bytes() for p in sorted(repo.rglob("*"))
            if p.is_file() and not skipped & set(p.relative_to(repo).parts)}


def test_a_kill_and_the_next_run_leave_every_byte_of_yours_in_place(git_repo: Path, tmp_path: Path) -> None:
    # Your uncommitted edit of a tracked file and a new file, while an attempt that rewrites
    # the README runs in its worktree; a kill; more of your work after it; the next run.
    repo, state = agent_project(git_repo, tmp_path, mode="overwrite")
    (repo / "README.md").write_bytes(b"my uncommitted work\r\nwith its own line ends\r\n")
    (repo / "notes.txt").write_bytes(b"my untracked notes\n")
    first = start(repo, "--allow-dirty")
    wait_for(state / "agent", first)
    yours = checkout_files(repo)
    assert yours["calc.py"] == CALC.encode()  # the half-way attempt is in its worktree, not here
    kill(first)
    assert checkout_files(repo) == yours
    (repo / "after.txt").write_bytes(b"written after the crash\n")
    yours = checkout_files(repo)

    assert do_one_task(repo) == 4  # uncommitted work of yours: refused, nothing touched
    assert checkout_files(repo) == yours
    assert do_one_task(repo, "--allow-dirty") == 0
    (sha,) = tasks_on_disk(repo)["T-1"]["commits"]
    assert git(repo, "show", "--name-only", "--format=", sha).split() == ["calc.py"]
    assert checkout_files(repo) == {**yours, "calc.py": FIXED.encode()}  # the fix landed, and only it
    assert not (repo / ".openagents" / "recovered").exists()
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1  # the dead run's is gone


def test_ctrl_c_leaves_your_checkout_as_it_is(git_repo: Path, tmp_path: Path) -> None:
    repo, state = agent_project(git_repo, tmp_path)
    first = start(repo)
    wait_for(state / "agent", first)
    (repo / "calc.py").write_bytes(b"def add(a, b):\n    return a + b  # mine\n")
    first.send_signal(signal.SIGINT)
    out, _ = first.communicate(timeout=WAIT_S)

    assert first.returncode == 130
    assert "your checkout left as it was" in out
    assert (repo / "calc.py").read_bytes() == b"def add(a, b):\n    return a + b  # mine\n"
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"


def test_the_prompt_file_of_a_killed_run_is_removed_by_the_next_run(
    git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, state = agent_project(git_repo, tmp_path)
    temp = tmp_path / "temp"
    temp.mkdir()
    first = start(repo, env={"TMPDIR": str(temp)})
    wait_for(state / "agent", first)
    kill(first)
    assert [p.name for p in temp.glob("goldenloop-prompt-*")] != []  # the killed agent's prompt, left behind

    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    assert do_one_task(repo) == 0
    assert list(temp.glob("goldenloop-*")) == []


def test_a_kill_during_the_attempts_commit_never_reaches_your_branch(git_repo: Path, tmp_path: Path) -> None:
    repo, state = agent_project(git_repo, tmp_path)
    (state / "runs").write_text("1")  # the agent writes the fix at once
    head = git(repo, "rev-parse", "HEAD")
    # Killed between the commit's two steps in the task's worktree: its index written, its HEAD not moved.
    first = start(repo, env={"PATH": git_that_kills_its_caller(tmp_path, "update-ref*", before=True)})
    first.communicate(timeout=WAIT_S)
    assert first.returncode == -signal.SIGKILL
    assert git(repo, "rev-parse", "HEAD") == head  # only the run's own backlog is left uncommitted:
    assert [line for line in git(repo, "status", "--porcelain").splitlines() if ".openagents/" not in line] == []

    assert do_one_task(repo) == 0  # the commit is made again by the task's next run
    assert git(repo, "status", "--porcelain") == ""  # index, tree and HEAD agree
    (sha,) = tasks_on_disk(repo)["T-1"]["commits"]
    assert git(repo, "show", f"{sha}:calc.py") == FIXED
    assert (state / "runs").read_text() == "3"  # the agent ran again: the worktree's commit never landed


def test_no_process_of_an_agent_outlives_a_goldenloop_killed_with_sigkill(git_repo: Path, tmp_path: Path) -> None:
    # The agent left a daemon in a session of its own (double fork, setsid): both die with
    # goldenloop, before any next run, so neither can write over what the user does next.
    repo, state = agent_project(git_repo, tmp_path, mode="escape")
    first = start(repo)
    agent = wait_for(state / "agent", first)
    escapee = wait_for(state / "escapee", first)
    assert alive(agent) and alive(escapee)
    kill(first)
    try:
        deadline = time.monotonic() + WAIT_S
        while alive(agent) or alive(escapee):
            assert time.monotonic() < deadline, "the agent outlived goldenloop"
            time.sleep(0.01)
        assert do_one_task(repo) == 0
    finally:
        for pid in (agent, escapee):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_check_left_running_by_a_kill_during_the_preflight_is_stopped_by_the_next_run(git_repo: Path,
                                                                                       tmp_path: Path) -> None:
    pid_file = tmp_path / "check.pid"
    check = tmp_path / "check.py"  # hangs the first time (the preflight), then checks add()
    check.write_text(f"""import os, pathlib, sys, time
marker = pathlib.Path({str(pid_file)!r})
if not marker.exists():
    marker.write_text(str(os.getpid()))
    time.sleep(300)
sys.path.insert(0, os.getcwd())
import calc
sys.exit(0 if calc.add(2, 3) == 5 else 1)
""")
    replies = [{"match": "Task T-1", "reply": f"calc.py\n```python\n{FIXED}```\n", "times": None}]
    config = {"testCommands": [f"{PY} {check}"], "reflexion": {"maxRetries": 0, "useLlm": False}}
    repo = make_project(git_repo, replies, config=config)
    first = start(repo)
    hung = wait_for(pid_file, first)
    kill(first)
    assert alive(hung)  # SIGKILL of goldenloop alone leaves its check running

    try:
        assert do_one_task(repo) == 0
        assert not alive(hung)
    finally:
        if alive(hung):
            os.kill(hung, signal.SIGKILL)


def test_a_check_that_daemonizes_a_child_leaves_no_process_after_its_timeout(git_repo: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "daemon.pid"
    daemonize = (f"{PY} -c \"import os,time,pathlib\nif os.fork()==0:\n os.setsid()\n if os.fork()==0:\n"
                 f"  pathlib.Path('{pid_file}').write_text(str(os.getpid()))\n  time.sleep(300)\n os._exit(0)\n"
                 "time.sleep(300)\"")
    replies = [{"match": "Task T-1", "reply": f"calc.py\n```python\n{FIXED}```\n", "times": None}]
    config = {"testCommands": [daemonize], "timeouts": {"verifySeconds": 2},
              "retry": {"preflight": False, "flakyReruns": 0}, "reflexion": {"maxRetries": 0, "useLlm": False}}
    repo = make_project(git_repo, replies, config=config)

    assert do_one_task(repo) == 1
    daemon = int(pid_file.read_text())
    try:
        assert not alive(daemon)
    finally:
        if alive(daemon):
            os.kill(daemon, signal.SIGKILL)


CHAIN_CHECK = """import os, pathlib, signal, sys, time
out = pathlib.Path(sys.argv[1])
def escape(name):  # a child in a session of its own that ignores SIGTERM
    if os.fork():
        return
    os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if name == "outer":
        escape("inner")  # the inner escapee's parent is the outer one, alive until killed
    (out / name).write_text(str(os.getpid()))
    while True:
        time.sleep(0.1)
escape("outer")
while not ((out / "outer").exists() and (out / "inner").exists()):
    time.sleep(0.05)
sys.exit(1)
"""


def test_a_check_leaves_no_process_even_through_a_chain_of_escapes(git_repo: Path, tmp_path: Path) -> None:
    out = tmp_path / "pids"
    out.mkdir()
    (tmp_path / "check.py").write_text(CHAIN_CHECK)
    replies = [{"match": "Task T-1", "reply": f"calc.py\n```python\n{FIXED}```\n", "times": None}]
    config = {"testCommands": [f"{PY} {tmp_path / 'check.py'} {out}"],
              "retry": {"preflight": False, "flakyReruns": 0}, "reflexion": {"maxRetries": 0, "useLlm": False}}
    repo = make_project(git_repo, replies, config=config)

    assert do_one_task(repo) == 1
    pids = [int((out / name).read_text()) for name in ("outer", "inner")]
    try:
        assert [pid for pid in pids if alive(pid)] == []
    finally:
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_the_journal_holds_no_copy_of_your_files_and_is_never_committed(git_repo: Path, tmp_path: Path) -> None:
    repo, state = agent_project(git_repo, tmp_path, mode="overwrite")
    (repo / "README.md").write_text("my private draft\n")
    first = start(repo, "--allow-dirty")
    wait_for(state / "agent", first)
    kill(first)
    journal = [p for p in (repo / ".openagents" / "journal").rglob("*") if p.is_file()]
    assert journal and not any(b"my private draft" in p.read_bytes() for p in journal)

    assert do_one_task(repo, "--allow-dirty") == 0
    tracked = git(repo, "ls-files", ".openagents").split()
    assert not [t for t in tracked if "journal" in t]
    assert "journal/" in (repo / ".openagents" / ".gitignore").read_text()
    assert (repo / "README.md").read_text() == "my private draft\n"


def test_a_kill_during_the_bookkeeping_commit_leaves_no_stale_index(git_repo: Path, tmp_path: Path) -> None:
    repo, state = agent_project(git_repo, tmp_path)
    (state / "runs").write_text("1")  # the agent writes the fix at once
    first = start(repo, env={"PATH": git_that_kills_its_caller(tmp_path, "update-ref*bookkeeping*", before=True)})
    first.communicate(timeout=WAIT_S)
    assert first.returncode == -signal.SIGKILL
    staged = git(repo, "diff", "--cached", "HEAD", "--", ".openagents/tasks.jsonl")
    assert '+{"id":"T-1"' in staged  # the closed task staged, never its reopening

    assert do_one_task(repo) == 3  # nothing left to do: the task was closed and committed
    assert git(repo, "diff", "--cached", "--name-only") == ""
    assert git(repo, "status", "--porcelain") == ""
    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"


def test_a_commit_made_after_the_kill_stays_in_history_and_the_task_runs_on_top_of_it(
    git_repo: Path, tmp_path: Path
) -> None:
    repo, state = agent_project(git_repo, tmp_path)
    first = start(repo)
    wait_for(state / "agent", first)
    kill(first)
    (repo / "README.md").write_text("my edit\n")
    git(repo, "commit", "-qm", "my readme", "--", "README.md")  # right away: nothing may undo it
    mine = git(repo, "rev-parse", "HEAD").strip()

    assert do_one_task(repo) == 0
    assert mine in git(repo, "log", "--format=%H").split()
    assert git(repo, "show", "HEAD:README.md") == "my edit\n"
    (sha,) = tasks_on_disk(repo)["T-1"]["commits"]
    assert git(repo, "rev-parse", f"{sha}~1").strip() == mine


REVISING_AGENT = """import os, pathlib, sys, time
state = pathlib.Path(sys.argv[1])
runs = state / "runs"
n = int(runs.read_text()) + 1 if runs.exists() else 1
runs.write_text(str(n))
calc = pathlib.Path("calc.py")
if n == 1:  # passes the tests, but the review's lint command refuses a bare except
    calc.write_text("def add(a, b):\\n    try:\\n        return a + b\\n    except:\\n        pass\\n\\n\\n"
                    "def mul(a, b):\\n    return a * b\\n")
elif n == 2:  # the revision: half-way, then the machine goes away
    calc.write_text("def add(a, b):\\n    return 0  # half-way\\n")
    (state / "agent").write_text(str(os.getpid()))
    time.sleep(300)
else:
    calc.write_text(pathlib.Path(sys.argv[2]).read_text())
"""


def test_a_kill_during_a_review_revision_loses_neither_the_tree_nor_the_passing_version(
        git_repo: Path, tmp_path: Path) -> None:
    state = tmp_path / "agent-state"
    state.mkdir()
    (tmp_path / "agent.py").write_text(REVISING_AGENT)
    (tmp_path / "fixed.txt").write_text(FIXED)
    lint = f"{PY} -c \"import sys; sys.exit('except:' in open('calc.py').read())\""
    config = {"executor": {"kind": "command",
                           "command": f"{PY} {tmp_path / 'agent.py'} {state} {tmp_path / 'fixed.txt'} {{prompt_file}}"},
              "retry": {"preflight": False}, "reflexion": {"useLlm": False},
              "review": {"enabled": True, "useLLM": False, "criteria": [{"name": "lint", "command": lint}]}}
    repo = make_project(git_repo, [], config=config)

    first = start(repo)
    reviser = wait_for(state / "agent", first)  # the revision is under way
    kill(first)

    assert do_one_task(repo) == 0  # recovered, then run again: the third agent run is clean
    assert not alive(reviser)  # however soon after its start the kill came
    (sha,) = [line.split()[0] for line in git(repo, "log", "--format=%H %s").splitlines() if line.endswith(" T-1: Fix add")]
    assert git(repo, "show", f"{sha}:calc.py") == FIXED
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""
    passing = repo / ".openagents" / "history" / "T-1" / "T-1.1.attempt-1.patch"
    assert "+    except:" in passing.read_text()  # the killed run's passing version is still on disk
    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"


def test_a_kill_before_the_retry_writes_its_reflection_leaves_it_to_the_next_run(git_repo: Path) -> None:
    # reflexion.oneCall: attempt 1's reflection is to come with attempt 2's reply, which hangs
    hanging = [{"match": "Task T-1", "reply": WRONG_ADD}, {"match": "Attempt 1 failed", "reply": "", "delay": 600}]
    repo = make_project(git_repo, hanging, config={"reflexion": {"oneCall": True}, "retry": {"preflight": False}})
    plan = repo / ".openagents" / "subtasks" / "T-1.json"
    first = start(repo)
    deadline = time.monotonic() + WAIT_S
    while '"pendingReflection": {' not in (plan.read_text() if plan.exists() else ""):
        assert first.poll() is None and time.monotonic() < deadline, "attempt 1 never failed"
        time.sleep(0.05)
    kill(first)
    fixing = {"replies": [{"match": "Task T-1", "reply": FIX_ADD}]}
    (repo / ".openagents" / "script.json").write_text(json.dumps(fixing))

    assert do_one_task(repo) == 0

    [line] = [r for r in reflection_lines(repo) if r.get("attemptNumber") == 1]
    assert line["source"] == "heuristic" and "test_add_negative" in line["analysis"] + line["suggestion"]
    attempts = json.loads(plan.read_text())["subtasks"][0]
    assert attempts["attempts"][0]["reflectionId"] == line["id"] and attempts.get("pendingReflection") is None
