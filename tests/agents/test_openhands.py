"""OpenHands, the real program (its CLI 1.16), driven through goldenloop against the scripted
model server.

OpenHands calls the model through litellm with OpenAI function calling: the scripted
replies are its own `file_editor`, `terminal` and `finish` tool calls, which it runs in
the repository itself (no container). It exits 0 even when its conversation ended on an
error, and prints its usage nowhere: goldenloop reads that from the conversation it saves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentkit import agent_project, transcript
from model_server import ModelServer, ToolCall, Turn, Usage
from offline import closed_port, loopback_only
from programs import needs, program
from projects import CALC, do_one_task, events_of, git, tasks_on_disk

from orchestrator.batch.worktree import Worktrees

pytestmark = needs("openhands")

FIXED = CALC.replace("a - b", "a + b")
ARGV_WORDS = ("--override-with-envs", "--headless --json")  # of its command line


@pytest.fixture
def openhands_home(tmp_path: Path, model_server: ModelServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home of the test's own, OpenHands pointed at the model server the way docs/AGENTS.md
    says, with its model retries off so that a failing server fails at once (by default it
    retries for two minutes). Nothing but loopback is reachable: its public skills download
    fails at once."""
    loopback_only(monkeypatch)
    home = tmp_path / "home"
    (home / ".openhands").mkdir(parents=True)
    settings = {"llm": {"model": "openai/scripted", "usage_id": "agent", "num_retries": 0}}
    (home / ".openhands" / "agent_settings.json").write_text(json.dumps(settings))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("LLM_BASE_URL", model_server.openai_base_url)
    monkeypatch.setenv("LLM_API_KEY", "sk-test")
    return home


def project(repo: Path, model: str = "openai/scripted") -> Path:
    return agent_project(repo, "openhands", agentModel=model)


def fix_add(repo: Path, usage: list[Usage]) -> list[Turn]:
    """Its tool calls: edit calc.py (its editor wants an absolute path: in the folder it
    runs in, the task's worktree, which its prompt names as its working directory), run
    it, finish."""
    tree = Worktrees(repo.resolve()).home / "worker-1"
    edit = {"command": "str_replace", "path": str(tree / "calc.py"), "old_str": "return a - b",
            "new_str": "return a + b", "security_risk": "LOW"}
    run = {"command": "python3 -c 'import calc; print(\"sum\", calc.add(2, 3))'", "security_risk": "LOW"}
    return [Turn(tool_calls=[ToolCall("file_editor", edit)], usage=usage[0]),
            Turn(match="has been edited", tool_calls=[ToolCall("terminal", run)], usage=usage[1]),
            Turn(match="sum 5", tool_calls=[ToolCall("finish", {"message": "add() returns a + b now."})],
                 usage=usage[2])]


def saved_state(home: Path, conversation: str) -> dict[str, Any]:
    return json.loads((home / ".openhands" / "conversations" / conversation / "base_state.json").read_text())


def test_openhands_tool_calls_fix_the_repository_and_its_tokens_and_cost_are_counted(
    git_repo: Path, openhands_home: Path, model_server: ModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    model_server.script(fix_add(git_repo, [Usage(1000, 50), Usage(1200, 40), Usage(1300, 20)]))
    repo = project(git_repo, model="openai/gpt-4o-mini")  # one litellm prices

    assert do_one_task(repo) == 0

    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    (sha,) = tasks_on_disk(repo)["T-1"]["commits"]
    assert git(repo, "show", "--name-only", "--format=", sha).split() == ["calc.py"]
    assert (repo / "calc.py").read_text() == FIXED
    assert {r.model for r in model_server.model_requests()} == {"gpt-4o-mini"}  # LLM_MODEL reached it
    [run] = events_of(repo, "agent_run")
    assert run["finalMessage"] == "add() returns a + b now."
    saved = saved_state(openhands_home, run["sessionId"])["stats"]["usage_to_metrics"]["agent"]
    [call] = events_of(repo, "model_call")
    assert (call["inputTokens"], call["outputTokens"], call["costKnown"]) == (3500, 110, True)
    assert call["costUsd"] == saved["accumulated_cost"] > 0
    assert f"cost ${saved['accumulated_cost']:.4f}" in capsys.readouterr().out
    kept = transcript(repo)
    assert '"kind": "FinishAction"' in kept and "Conversation ID: " + run["sessionId"] in kept


def test_a_server_that_is_down_blocks_the_task_at_once_in_openhands_words(
    git_repo: Path, openhands_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LLM_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")
    repo = project(git_repo)

    assert do_one_task(repo) == 1

    assert tasks_on_disk(repo)["T-1"]["status"] == "blocked"
    assert len(events_of(repo, "agent_run")) == 1 and events_of(repo, "model_call") == []
    out = capsys.readouterr().out
    assert ("the agent cannot run here: openhands: LLMServiceUnavailableError: litellm.InternalServerError: "
            "InternalServerError: OpenAIException - Connection error.") in out
    assert "OpenHands/extensions" not in out and not any(word in out for word in ARGV_WORDS)


def test_a_conversation_error_is_openhands_giving_up_and_the_retry_is_told_so(
    git_repo: Path, openhands_home: Path, model_server: ModelServer
) -> None:
    model_server.script([Turn(error="bad_request"), *fix_add(git_repo, [Usage(900, 30)] * 3)])
    repo = project(git_repo)

    assert do_one_task(repo) == 0

    [gave_up] = events_of(repo, "edit_failed")
    assert (gave_up["failureKind"], gave_up["error"]) == (
        "agent", "openhands: LLMBadRequestError: litellm.BadRequestError: OpenAIException - Invalid request.")
    assert events_of(repo, "verdict")[0]["attempt"] == 2  # no tests were run on attempt 1
    retry = model_server.prompts()[1]
    assert "Invalid request." in retry and not any(word in retry for word in ARGV_WORDS)
    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    last = events_of(repo, "model_call")[-1]  # a model litellm cannot price: unknown, never $0
    assert (last["inputTokens"], last["outputTokens"], last.get("costUsd"), last["costKnown"]) == (2700, 90, None, False)
