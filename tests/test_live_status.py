"""do-one-task on a terminal shows what it waits for on a live line; in a pipe, plain lines.

A process of its own on a pseudo-terminal, as a user's shell runs it."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from projects import FIX_ADD, init_repo, make_project

RUN = [sys.executable, "-m", "orchestrator.cli", "do-one-task", "--dir"]


def on_a_terminal(repo: Path) -> str:
    leader, follower = pty.openpty()
    done = subprocess.Popen([*RUN, str(repo)], stdin=follower, stdout=follower, stderr=follower,
                            env={**os.environ, "COLUMNS": "160", "TERM": "xterm"})
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the run has ended
            break
        if not chunk:
            break
        seen += chunk
    done.wait(timeout=600)
    os.close(leader)
    return seen.decode(errors="replace")


def test_a_terminal_gets_a_live_line_of_what_the_run_waits_for_and_a_pipe_does_not(git_repo: Path) -> None:
    slow = {"match": "Task T-1:", "reply": FIX_ADD, "delay": 1.0}  # a model that thinks a while
    repo = make_project(git_repo, [slow], config={"reflexion": {"useLLM": False}})

    shown = on_a_terminal(repo)

    assert "closed T-1 with 1 commit(s)" in shown
    assert "attempt 1: waiting for the model (scripted/.openagents/script.json)" in shown
    assert "tokens so far (cache not reported)" in shown  # the scripted model says nothing of a cache
    again = make_project(init_repo(repo.parent / "again"), [slow], config={"reflexion": {"useLLM": False}})
    piped = subprocess.run([*RUN, str(again)], capture_output=True, text=True, timeout=600, check=False)
    assert "closed T-1 with 1 commit(s)" in piped.stdout and "tokens so far" not in piped.stdout + piped.stderr
