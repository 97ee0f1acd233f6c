"""`goldenloop --help` names every command it runs, and an unknown command is one line and exit 2."""

from __future__ import annotations

import re

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
