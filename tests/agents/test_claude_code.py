"""Claude Code, the real program, driven through goldenloop against the scripted model server.

It reaches the server through ANTHROPIC_BASE_URL with a dummy key, as a user points it at a
gateway or a local model. The scripted replies are its own tool calls (Read, then Edit or
Write, which it executes in the repository); its result JSON says what it spent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agentkit import agent_project, closed_with_one_commit, nothing_done_blocks, transcript
from agentkit import environment_stop as stopped
from model_server import ModelServer, ToolCall, Turn, Usage
from offline import closed_port, loopback_only
from programs import needs, program
from projects import CALC, do_one_task, events_of

pytestmark = needs("claude-code")

FIXED = CALC.replace("a - b", "a + b")
ARGV_WORDS = ("--output-format", "--permission-mode", "--append-system-prompt")  # of its command line


@pytest.fixture
def claude_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """A fresh Claude Code home, no login of the user's, nothing but loopback reachable; its own
    retries off so that a server that is down fails in a second rather than minutes."""
    loopback_only(monkeypatch)
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL",
                 "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-home"))
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
    monkeypatch.setenv("CLAUDE_CODE_MAX_RETRIES", "0")
    return monkeypatch


@pytest.fixture
def claude(claude_env: pytest.MonkeyPatch, model_server: ModelServer) -> ModelServer:
    """Claude Code pointed at the model server with a key it accepts."""
    claude_env.setenv("ANTHROPIC_BASE_URL", model_server.anthropic_base_url)
    claude_env.setenv("ANTHROPIC_API_KEY", "sk-ant-dummy")
    return model_server


def project(repo: Path, **executor: Any) -> Path:
    return agent_project(repo, "claude-code", timeout_s=120, **executor)


def read(path: str = "calc.py") -> ToolCall:
    return ToolCall("Read", {"file_path": path})


def test_claude_code_edits_the_repository_and_what_it_reports_is_counted(
    git_repo: Path, claude: ModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    claude.script([
        Turn(match="Task T-1", tool_calls=[read()], usage=Usage(1000, 40)),
        Turn(match="return a - b", usage=Usage(1100, 60),
             tool_calls=[ToolCall("Edit", {"file_path": "calc.py", "old_string": "return a - b",
                                           "new_string": "return a + b"})]),
        Turn(match="updated successfully", reply="add() returns a + b now.", usage=Usage(1200, 10)),
    ])
    repo = project(git_repo)

    closed_with_one_commit(repo, FIXED)

    [call] = events_of(repo, "model_call")
    assert (call["inputTokens"], call["outputTokens"]) == (3300, 110)  # the server's usage, summed
    assert call["costKnown"] and call["costUsd"] > 0  # priced by Claude Code itself
    [run] = events_of(repo, "agent_run")
    assert run["finalMessage"] == "add() returns a + b now." and len(run["sessionId"]) == 36
    assert f"${call['costUsd']:.4f}" in capsys.readouterr().out
    assert [r.path for r in claude.model_requests()] == ["/v1/messages"] * 3
    assert "add() returns a + b now." in transcript(repo)


def test_a_run_its_turn_limit_stops_is_retried_with_its_own_words_never_the_command_line(
    git_repo: Path, claude: ModelServer
) -> None:
    fixed = ToolCall("Write", {"file_path": "calc.py", "content": FIXED})
    wrong = ToolCall("Edit", {"file_path": "calc.py", "old_string": "return a - b", "new_string": "return 0"})
    claude.script([
        Turn(match="Attempt 1 failed to run", tool_calls=[read()]),  # the retry
        Turn(match="Task T-1", tool_calls=[read()]),
        Turn(match="return a - b", tool_calls=[wrong]),
        Turn(match="updated successfully", tool_calls=[read()]),  # its third turn, the limit
        Turn(match="def add", tool_calls=[fixed]),
        Turn(reply="Fixed add.", times=None),
    ])
    repo = project(git_repo, maxTurns=3)

    assert do_one_task(repo) == 0

    [stopped] = events_of(repo, "edit_failed")
    assert (stopped["failureKind"], stopped["error"]) == ("agent", "claude-code: Reached maximum number of turns (3)")
    assert [e["attempt"] for e in events_of(repo, "agent_run")] == [1, 2]
    retry = next(r.text for r in claude.model_requests() if "Attempt 1 failed to run" in r.text)
    assert "claude-code: Reached maximum number of turns (3)" in retry
    assert not any(word in retry for word in ARGV_WORDS)
    assert (repo / "calc.py").read_text() == FIXED


def environment_stop(repo: Path, capsys: pytest.CaptureFixture[str], sentence: str) -> str:
    return stopped(repo, capsys, f"claude-code: {sentence}", ARGV_WORDS)


def test_a_server_that_is_down_blocks_the_task_at_once(
    git_repo: Path, claude_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    claude_env.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{closed_port()}")
    claude_env.setenv("ANTHROPIC_API_KEY", "sk-ant-dummy")

    environment_stop(project(git_repo), capsys, "API Error: Unable to connect to API (ConnectionRefused)")


def test_a_refused_key_blocks_the_task_at_once(
    git_repo: Path, claude_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with ModelServer(api_key="sk-ant-the-real-one") as server:
        claude_env.setenv("ANTHROPIC_BASE_URL", server.anthropic_base_url)
        claude_env.setenv("ANTHROPIC_API_KEY", "sk-ant-dummy")
        environment_stop(project(git_repo), capsys, "Invalid API key · Fix external API key")
    assert [r.status for r in server.model_requests()] == [401]


def test_no_login_at_all_blocks_the_task_at_once(
    git_repo: Path, claude_env: pytest.MonkeyPatch, model_server: ModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    claude_env.setenv("ANTHROPIC_BASE_URL", model_server.anthropic_base_url)

    environment_stop(project(git_repo), capsys, "Not logged in · Please run /login")
    assert model_server.model_requests() == []


def test_an_empty_reply_from_the_model_changes_nothing_and_the_task_is_blocked_not_closed(
    git_repo: Path, claude: ModelServer
) -> None:
    claude.script([Turn(times=None)])  # every call answered with no content at all: Claude Code ends as done
    nothing_done_blocks(project(git_repo))
