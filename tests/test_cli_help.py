"""`goldenloop --help` names every command it runs, and an unknown command is one line and exit 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from orchestrator.cli import BACKLOG_COMMANDS, OTHER_COMMANDS, main


def test_help_lists_every_command(capsys) -> None:
    assert main(["--help"]) == 0
    names = [line[2:16] for line in capsys.readouterr().out.splitlines() if line.startswith("  ")]
    listed = set(re.findall(r"[a-z][a-z-]+", " ".join(names)))
    assert {"do-one-task", "overnight", *OTHER_COMMANDS, *BACKLOG_COMMANDS} <= listed


def test_an_unknown_command_is_named_and_exits_2(capsys) -> None:
    assert main(["wroker"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[0] == "goldenloop: unknown command 'wroker'" and "Traceback" not in err


def test_every_command_tells_its_version(capsys) -> None:
    from importlib.metadata import version

    installed = version("goldenloop")
    assert main(["--version"]) == 0 and capsys.readouterr().out == f"goldenloop {installed}\n"
    for command in ("do-one-task", "overnight", *OTHER_COMMANDS, *BACKLOG_COMMANDS):
        with pytest.raises(SystemExit) as done:  # argparse's own way out, as for --help
            main([command, "--version"])
        assert done.value.code == 0 and capsys.readouterr().out.strip().endswith(f" {installed}"), command


def test_help_of_a_command_is_its_usage_and_an_unknown_one_is_named(capsys) -> None:
    assert main(["help"]) == 0 and "the golden loop:" in capsys.readouterr().out
    with pytest.raises(SystemExit) as done:
        main(["help", "show"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("usage: goldenloop show")
    assert main(["help", "shwo"]) == 2 and "unknown command 'shwo'" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["list"], ["status"], ["show", "T-1"], ["add", "fix it"], ["reopen", "T-1"]])
def test_a_broken_project_json_is_one_sentence_and_exit_2(tmp_path: Path, capsys, command: list[str]) -> None:
    (tmp_path / ".openagents").mkdir()
    (tmp_path / ".openagents" / "project.json").write_text('{"testCommands": ["pytest -q"],  // mine\n}')
    (tmp_path / ".openagents" / "tasks.jsonl").write_text("")

    assert main([*command, "--dir", str(tmp_path)]) == 2

    err = capsys.readouterr().err
    assert err.startswith(f"goldenloop {command[0]}: project.json is not valid JSON") and err.count("\n") == 1


def test_init_and_checks_answer_in_json(git_repo: Path, capsys) -> None:
    (git_repo / "test_a.py").write_text("def test_a():\n    assert 1 == 2\n")

    assert main(["init", "--json", "--dir", str(git_repo)]) == 0
    wrote = json.loads(capsys.readouterr().out)
    assert wrote["wrote"] == str(git_repo / ".openagents" / "project.json") and len(wrote["testCommands"]) == 1
    assert main(["checks", "baseline", "--json", "--dir", str(git_repo)]) == 0
    baseline = json.loads(capsys.readouterr().out)
    assert baseline["failing"] == [{"test": "test_a.py::test_a", "waived": False}] and baseline["complete"]
    assert main(["checks", "waive", "test_a.py::test_a", "--reason", "known bug", "--json", "--dir",
                 str(git_repo)]) == 0
    assert json.loads(capsys.readouterr().out) == {"waived": 1, "alreadyListed": 0}
