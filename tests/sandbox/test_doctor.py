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


def test_doctor_says_which_model_the_agent_and_goldenloop_call_and_where(
    git_repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:8080/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-anything")
    (git_repo / ".openagents").mkdir()
    settings = {"testCommands": ["pytest -q"], "executor": {"kind": "aider", "agentModel": "openai/qwen"}}
    (git_repo / ".openagents" / "project.json").write_text(json.dumps(settings))

    _, lines = doctor(git_repo, capsys)

    assert "ok   checks: `pytest -q`" in lines
    where = "openai/qwen at http://127.0.0.1:8080/v1 (OPENAI_API_BASE); OPENAI_API_KEY is set"
    assert f"ok   the agent's model: {where}" in lines and f"ok   goldenloop's own model: {where}" in lines
    assert not any("sk-local-anything" in line for line in lines)


def test_doctor_says_goldenloop_calls_no_model_nobody_named(
    git_repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    (git_repo / ".openagents").mkdir()
    (git_repo / ".openagents" / "project.json").write_text('{"executor": {"kind": "mini-swe-agent"}}')

    _, lines = doctor(git_repo, capsys)

    assert any(line.startswith("ok   goldenloop's own model: none named, so its reflections are heuristic")
               for line in lines)
    assert any(line.startswith("NO") and "sets no testCommands or typecheckCommands" in line for line in lines)
    assert not any("gpt-4o-mini" in line for line in lines)
