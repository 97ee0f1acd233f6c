"""An agent program that is not installed: a config error found before any attempt, by
`do-one-task` and `overnight` alike, and only where the command line can be read for sure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from projects import FIX_ADD, do_one_task, make_project, model_calls, run_events, tasks_on_disk

from orchestrator.cli import overnight_main
from orchestrator.config import ExecutorConfig
from orchestrator.executors.program import missing_agent_program

MISSING = {"executor": {"kind": "command", "command": "AGENT_MODE=fast no-such-agent-xyz --prompt {prompt_file}"}}


def test_do_one_task_refuses_a_missing_agent_in_one_sentence_and_leaves_the_task_open(git_repo, capsys):
    repo = make_project(git_repo, [{"match": "Task T-1", "reply": FIX_ADD}], config=MISSING)

    assert do_one_task(repo) == 2

    err = capsys.readouterr().err
    assert err.startswith("do-one-task: the agent program 'no-such-agent-xyz' is not installed here")
    assert err.endswith("install it, or fix executor.command in .openagents/project.json\n")
    assert err.count("\n") == 1
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"
    assert run_events(repo) == [] and model_calls(repo) == 0  # no run started, no attempt recorded
    assert not (repo / ".openagents" / "subtasks").exists()


def test_overnight_refuses_the_repository_up_front(git_repo, capsys):
    repo = make_project(git_repo, [{"match": "Task T-1", "reply": FIX_ADD}], config=MISSING)

    assert overnight_main([str(repo), "--json"]) == 2

    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    (refused,) = [line for line in lines if line["event"] == "repository_refused"]
    assert "'no-such-agent-xyz' is not installed here" in refused["reason"]
    assert not [line for line in lines if line["event"] == "task_started"]
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"


def _problem(command: str, repo: Path) -> str | None:
    return missing_agent_program(ExecutorConfig(kind="command", command=command), repo)


@pytest.mark.parametrize(
    "command",
    [
        "sh -c 'no-such-agent-xyz --prompt \"$0\"' {prompt_file}",  # the shell's business
        "cd {repo} && no-such-agent-xyz {prompt_file}",  # a builtin first: the rest is not read
        '"$AGENT_BIN" --prompt {prompt_file}',
        "{repo}/no-such-agent-xyz {prompt_file}",
        "PATH=/opt/agent/bin no-such-agent-xyz {prompt_file}",
        "(no-such-agent-xyz {prompt_file})",
        "no-such-agent-xyz {prompt_file} 'unbalanced",
    ],
)
def test_what_the_shell_would_have_to_interpret_is_not_judged(command: str, tmp_path: Path) -> None:
    assert _problem(command, tmp_path) is None


def test_a_program_is_found_on_path_or_relative_to_the_repository(tmp_path: Path) -> None:
    agent = tmp_path / "bin" / "agent"
    agent.parent.mkdir()
    agent.write_text("#!/bin/sh\n")
    agent.chmod(0o755)

    assert _problem("git status {prompt_file}", tmp_path) is None
    assert _problem("./bin/agent --prompt {prompt_file}", tmp_path) is None
    assert "'./bin/missing'" in (_problem("./bin/missing --prompt {prompt_file}", tmp_path) or "")
    assert missing_agent_program(ExecutorConfig(kind="builtin"), tmp_path) is None
    preset = ExecutorConfig(kind="codex", program="/nowhere/codex")
    assert "fix executor.program" in (missing_agent_program(preset, tmp_path) or "")
