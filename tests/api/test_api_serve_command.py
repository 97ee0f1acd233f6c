"""`goldenloop serve` refuses a bad start in one sentence, with exit 2, before it listens."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator import cli

ENV = ("REFLECT_SKILL_ENABLED", "REFLECT_DEFAULT_CRITERIA", "REFLECT_SUCCESS_THRESHOLD", "REFLECT_MAX_REFLECTIONS",
       "GOLDENLOOP_API_TOKEN")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert cli.main(["serve", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("goldenloop serve: ")
    return err


@pytest.mark.parametrize(("name", "value", "words"), [
    ("REFLECT_SKILL_ENABLED", "maybe", "REFLECT_SKILL_ENABLED must be true or false"),
    ("REFLECT_SUCCESS_THRESHOLD", "1.5", "REFLECT_SUCCESS_THRESHOLD must be a number from 0 to 1"),
    ("REFLECT_SUCCESS_THRESHOLD", "nan", "REFLECT_SUCCESS_THRESHOLD must be a number from 0 to 1"),
    ("REFLECT_MAX_REFLECTIONS", "0", "REFLECT_MAX_REFLECTIONS must be a whole number of 1 or more"),
    ("REFLECT_MAX_REFLECTIONS", "three", "REFLECT_MAX_REFLECTIONS must be a whole number of 1 or more"),
    ("REFLECT_DEFAULT_CRITERIA", "task completion", "comma-separated snake_case names"),
    ("REFLECT_DEFAULT_CRITERIA", "task_completion,correctness", "'correctness', which only a model can score"),
])
def test_a_bad_environment_value_is_one_sentence_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path,
    name: str, value: str, words: str,
) -> None:
    monkeypatch.setenv(name, value)
    assert words in _refused(capsys, "--root", str(tmp_path), "--port", "0")


def test_a_non_loopback_host_needs_a_token(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    err = _refused(capsys, "--host", "0.0.0.0", "--root", str(tmp_path), "--port", "0")
    assert "GOLDENLOOP_API_TOKEN" in err


def test_a_missing_root_and_a_busy_port_are_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert "is not a folder" in _refused(capsys, "--root", str(tmp_path / "nowhere"), "--port", "0")
    with socket.create_server(("127.0.0.1", 0)) as busy:
        err = _refused(capsys, "--root", str(tmp_path), "--port", str(busy.getsockname()[1]))
    assert "cannot listen on 127.0.0.1:" in err


def test_without_the_api_extra_serve_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as if it were not installed
    assert "install goldenloop[api]" in _refused(capsys)


def test_help_imports_neither_starlette_nor_litellm() -> None:
    code = ("import sys\nfrom orchestrator import cli\n"
            "for argv in (['--help'], ['serve', '--help']):\n"
            "    try:\n        cli.main(argv)\n    except SystemExit:\n        pass\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'starlette', 'uvicorn', 'litellm', 'httpx'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.strip().splitlines()[-1] == "[]"
