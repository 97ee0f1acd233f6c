"""A run that calls no model loads no model client: no litellm, no openai module.

The command executor with heuristic reflections cannot call a model, whatever model the
project names. Its runs are checked in a fresh interpreter (this test process has long
imported litellm for the scripted model), through a failed attempt, its heuristic
reflection and the retry that passes, so the paths that could reach a client all run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from projects import make_project, reflection_lines, tasks_on_disk

# Prints, at exit, the model-client modules the run imported (sys.modules is complete then).
RUN_AND_LIST = """
import atexit, sys
atexit.register(lambda: print("MODEL MODULES:", json.dumps(sorted(
    m for m in sys.modules if m.split(".")[0] in ("litellm", "openai")))))
import json
from orchestrator.cli import do_one_task_main, overnight_main
main = {"do-one-task": do_one_task_main, "overnight": overnight_main}[sys.argv[1]]
sys.exit(main(sys.argv[2:]))
"""


def command_project(repo: Path, marker: Path) -> Path:
    """A task whose first attempt fails its test and whose second passes (the marker,
    outside the repository, tells them apart)."""
    agent = (f"if [ -e {marker} ]; then echo ok > out.txt; else touch {marker}; echo wrong > out.txt; fi; "
             "test -s {prompt_file}")
    config = {"defaultModel": "openai/gpt-4o-mini", "testCommands": ["grep -q ok out.txt"],
              "executor": {"kind": "command", "command": agent}, "reflexion": {"useLLM": False}}
    return make_project(repo, [], config=config)


def model_modules(command: str, *args: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", RUN_AND_LIST, command, *args], capture_output=True, text=True,
                          env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("MODEL MODULES:"))
    return json.loads(line.removeprefix("MODEL MODULES:"))


@pytest.mark.slow
def test_do_one_task_with_a_command_agent_imports_no_model_client(git_repo, tmp_path):
    repo = command_project(git_repo, tmp_path / "tried-once")

    assert model_modules("do-one-task", "--dir", str(repo)) == []

    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert len(reflection_lines(repo)) == 1  # the failed attempt was reflected on, heuristically


@pytest.mark.slow
def test_overnight_with_a_command_agent_imports_no_model_client(git_repo, tmp_path):
    repo = command_project(git_repo, tmp_path / "tried-once")

    assert model_modules("overnight", str(repo)) == []

    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert len(reflection_lines(repo)) == 1


@pytest.mark.slow
def test_a_first_attempt_that_passes_imports_no_model_client_though_a_model_would_reflect(git_repo, tmp_path):
    """Model-written reflections wait for a failed verdict: litellm's import starts there."""
    config = {"testCommands": ["grep -q ok out.txt"], "reflexion": {"useLLM": True},
              "executor": {"kind": "command", "command": "echo ok > out.txt; test -s {prompt_file}"}}
    repo = make_project(git_repo, [], config=config)

    assert model_modules("do-one-task", "--dir", str(repo)) == []

    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
