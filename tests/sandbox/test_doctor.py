"""`goldenloop doctor` as a user runs it: each guarantee tried on this machine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.sandbox import abi


def doctor(folder: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(["doctor", "--dir", str(folder)])
    return code, capsys.readouterr().out.splitlines()


@pytest.mark.skipif(abi() == 0, reason="no Landlock here: doctor says NO, tested below")
def test_doctor_tries_the_sandbox_and_the_end_of_a_tree(git_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = doctor(git_repo, capsys)
    assert code == 0, lines
    assert any(line.startswith("ok") and f"Landlock ABI {abi()}, tried" in line for line in lines)
    assert any(line.startswith("ok") and "even when it is SIGKILLed (tried)" in line for line in lines)


def test_doctor_names_an_agent_program_that_is_missing(git_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (git_repo / ".openagents").mkdir()
    executor = {"kind": "codex", "program": "no-such-codex-here", "sandbox": False}
    (git_repo / ".openagents" / "project.json").write_text(json.dumps({"executor": executor}))
    code, lines = doctor(git_repo, capsys)
    assert code == 1
    assert "NO   codex: no-such-codex-here is not on PATH (install it, or set executor.program)" in lines
    assert any(line.startswith("NO") and "executor.sandbox is false" in line for line in lines)


def test_doctor_says_what_is_wrong_with_a_broken_config(git_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (git_repo / ".openagents").mkdir()
    (git_repo / ".openagents" / "project.json").write_text('{"executor": {"kind": "nobody"}}')
    code, lines = doctor(git_repo, capsys)
    assert code == 1
    assert any(line.startswith("NO") and "project.json cannot be used" in line for line in lines)


def test_doctor_names_a_folder_that_is_not_there(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = doctor(tmp_path / "nowhere", capsys)
    assert code == 1
    assert f"NO   {tmp_path / 'nowhere'}: no such folder (--dir names the project)" in lines
