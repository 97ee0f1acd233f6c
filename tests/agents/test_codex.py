"""Codex CLI, the real program, driven through goldenloop against the scripted model server.

Codex reaches a local model only through a custom provider in $CODEX_HOME/config.toml that
speaks the Responses API (it refuses `wire_api = "chat"`). The scripted replies are its own
`exec_command` calls, which it runs in its sandbox (an `apply_patch` heredoc it applies
itself). It reports tokens and a thread id, never a cost.
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

pytestmark = needs("codex")

FIXED = CALC.replace("a - b", "a + b")
KEY_VARIABLE = "LOCAL_MODEL_API_KEY"
ARGV_WORDS = ("--output-last-message", "--sandbox", "exec --json")  # of its command line

# What docs/AGENTS.md tells users to write, with Codex's own retries off so that a failing
# server fails in a second.
CONFIG = """model = "scripted"
model_provider = "local"
check_for_update_on_startup = false

[model_providers.local]
name = "local model server"
base_url = "{base_url}"
env_key = "{key_variable}"
wire_api = "{wire_api}"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[features]
plugins = false
"""


@pytest.fixture
def codex_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A CODEX_HOME of the test's own, no login of the user's, nothing but loopback reachable."""
    loopback_only(monkeypatch)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "codex-home"
    home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(home))
    monkeypatch.setenv(KEY_VARIABLE, "sk-dummy")
    return home


def configure(home: Path, base_url: str, wire_api: str = "responses") -> None:
    (home / "config.toml").write_text(CONFIG.format(base_url=base_url, key_variable=KEY_VARIABLE, wire_api=wire_api))


@pytest.fixture
def codex(codex_home: Path, model_server: ModelServer) -> ModelServer:
    configure(codex_home, model_server.openai_base_url)
    return model_server


def project(repo: Path, **executor: Any) -> Path:
    return agent_project(repo, "codex", timeout_s=120, **executor)


def shell(command: str) -> ToolCall:
    return ToolCall("exec_command", {"cmd": command})


def patch(old: str, new: str) -> ToolCall:
    """Codex's own patch format, through its shell: it applies the patch itself."""
    body = f"*** Begin Patch\n*** Update File: calc.py\n@@ def add(a, b):\n-    {old}\n+    {new}\n*** End Patch"
    return shell(f"apply_patch <<'EOF'\n{body}\nEOF\n")


def test_codex_edits_the_repository_its_tokens_are_counted_and_its_cost_is_unknown(
    git_repo: Path, codex: ModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    codex.script([
        Turn(match="Task T-1", tool_calls=[patch("return a - b", "return a + b")], usage=Usage(1000, 40)),
        Turn(reply="add() returns a + b now.", usage=Usage(1100, 20)),
    ])
    repo = project(git_repo)

    closed_with_one_commit(repo, FIXED)

    [call] = events_of(repo, "model_call")
    assert (call["inputTokens"], call["outputTokens"]) == (2100, 60)  # the server's usage, summed
    assert (call.get("costUsd"), call["costKnown"]) == (None, False)
    out = capsys.readouterr().out
    assert "cost unknown" in out and "$0.0000" not in out
    [run] = events_of(repo, "agent_run")
    assert run["finalMessage"] == "add() returns a + b now." and run["sessionId"]
    assert [r.path for r in codex.model_requests()] == ["/v1/responses"] * 2
    kept = transcript(repo)
    assert '"type":"file_change"' in kept and "## last-message.txt" in kept


def test_a_run_that_fails_after_a_wrong_edit_is_retried_with_its_own_words_never_the_command_line(
    git_repo: Path, codex: ModelServer
) -> None:
    codex.script([
        Turn(match="Attempt 1 failed to run", tool_calls=[shell(f"cat > calc.py <<'EOF'\n{FIXED}EOF\n")]),
        Turn(match="Task T-1", tool_calls=[patch("return a - b", "return 0")]),
        Turn(match="Success", error="context_window"),  # after the patch: it gives up
        Turn(reply="Fixed add.", times=None),
    ])
    repo = project(git_repo)

    assert do_one_task(repo) == 0

    said = "codex: Codex ran out of room in the model's context window."
    [stopped] = events_of(repo, "edit_failed")
    assert stopped["failureKind"] == "agent" and stopped["error"].startswith(said)
    assert [e["attempt"] for e in events_of(repo, "agent_run")] == [1, 2]
    retry = next(r.text for r in codex.model_requests() if "Attempt 1 failed to run" in r.text)
    assert said in retry and not any(word in retry for word in ARGV_WORDS)
    assert (repo / "calc.py").read_text() == FIXED


def environment_stop(repo: Path, capsys: pytest.CaptureFixture[str], sentence: str) -> str:
    return stopped(repo, capsys, f"codex: {sentence}", ARGV_WORDS)


def test_a_server_that_is_down_blocks_the_task_at_once(
    git_repo: Path, codex_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Codex would wait for the network without end; goldenloop turns that off.
    configure(codex_home, f"http://127.0.0.1:{closed_port()}/v1")

    environment_stop(project(git_repo), capsys, "Connection failed: error sending request")


def test_a_refused_key_blocks_the_task_at_once(
    git_repo: Path, codex_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ModelServer(api_key="sk-the-real-one") as server:
        configure(codex_home, server.openai_base_url)
        environment_stop(project(git_repo), capsys, "unexpected status 401 Unauthorized: Incorrect API key provided.")
    assert [r.status for r in server.model_requests()] == [401]


def test_a_server_without_the_responses_api_blocks_the_task_at_once(
    git_repo: Path, codex_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ModelServer(apis=("chat",)) as server:
        configure(codex_home, server.openai_base_url)
        out = environment_stop(project(git_repo), capsys, "unexpected status 404 Not Found:")
    assert "no endpoint POST /v1/responses" in out
    assert [(r.path, r.status) for r in server.requests] == [("/v1/responses", 404)]


def test_a_provider_of_chat_completions_is_refused_by_codex_and_blocks_the_task_at_once(
    git_repo: Path, codex_home: Path, model_server: ModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    configure(codex_home, model_server.openai_base_url, wire_api="chat")

    refused = 'Error loading config.toml: `wire_api = "chat"` is no longer supported.'
    environment_stop(project(git_repo), capsys, refused)
    assert model_server.requests == []


def test_an_empty_reply_from_the_model_changes_nothing_and_the_task_is_blocked_not_closed(
    git_repo: Path, codex: ModelServer
) -> None:
    codex.script([Turn(times=None)])  # every call answered with no content at all: Codex ends as done
    nothing_done_blocks(project(git_repo))
