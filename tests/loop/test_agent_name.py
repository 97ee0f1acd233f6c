"""The name a command agent's reflections are filed under: what it runs, not its interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest
from projects import do_one_task, events_of, make_project, outcome_lines

from orchestrator.loop.agent_name import command_agent_name

FAILING_AGENT = "echo 'the agent gave up'\nexit 1\n"


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("python agent.py {prompt_file}", "agent"),
        ("python3 -u scripts/fix_bugs.py --in {prompt_file}", "fix_bugs"),
        ("sh tools/x.sh {prompt_file}", "x"),
        ("bash ./run-coder.sh {prompt_file}", "run-coder"),
        ("node dist/cli.js {prompt_file}", "cli"),
        ("node my-agent/index.js {prompt_file}", "my-agent"),
        ("uv run my-agent {prompt_file}", "my-agent"),
        ("python -m aider --yes --message-file {prompt_file}", "aider"),
        ('sh -c "claude -p < {prompt_file}"', "claude"),
        ("cat {prompt_file} | codex exec -", "codex"),
        ("cd sub && python agent.py {prompt_file} > log.txt", "agent"),
        ("FOO=1 timeout 600 ./bin/run-agent {prompt_file}", "run-agent"),
        ("/usr/local/bin/Aider --file {prompt_file}", "aider"),
    ],
)
def test_a_command_agent_is_named_by_what_it_runs(command: str, name: str) -> None:
    assert command_agent_name(command) == name


def test_a_command_that_runs_no_agent_names_none() -> None:
    assert command_agent_name("test -s {prompt_file} && echo hi && exit 1") is None


def test_an_agent_started_by_sh_files_its_reflection_under_its_script(git_repo: Path) -> None:
    repo = make_project(git_repo, [], files={"tools/x.sh": FAILING_AGENT}, config={
        "executor": {"kind": "command", "command": "sh tools/x.sh {prompt_file}"},
        "reflexion": {"maxRetries": 0, "useLLM": False}, "retry": {"preflight": False}})

    assert do_one_task(repo) == 1

    (failed,) = outcome_lines(repo)
    assert failed["agent"] == "x"
    page = events_of(repo, "outcome_reflected")[0]["page"]
    assert page.startswith(".openagents/memory/reflections/x/")
