"""Aider, the real program, driven through goldenloop against the scripted model server.

Aider edits in its "whole" format for a model it does not know: the reply names the file
and gives its new content. It exits 0 whatever happened, so how it stopped is read from
what it printed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentkit import agent_project, transcript
from model_server import ModelServer, Turn, Usage
from offline import closed_port, loopback_only
from programs import needs
from projects import (
    CALC,
    REFLECTION,
    do_one_task,
    events_of,
    git,
    goldenloop,
    outcome_lines,
    reflection_lines,
    task,
    tasks_on_disk,
)

pytestmark = needs("aider")

FIXED = CALC.replace("a - b", "a + b")
SUCCESS = {"strategy": "Return a + b.", "whyItWorked": "add() subtracted.", "replicable": True,
           "principle": "Read the failing assertion first.", "procedure": ["Read test_add.", "Fix add in calc.py."]}
WRONG = CALC.replace("a - b", "0")


def whole(text: str) -> str:
    """A reply in Aider's whole-file edit format."""
    return f"Here is the fix.\n\ncalc.py\n```\n{text}```\n"


@pytest.fixture
def aider_env(model_server: ModelServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModelServer:
    """Aider pointed at the model server, the way a user points it at a local one, with a
    home of the test's own (no .aider.conf.yml or .env of this machine's) and nothing but
    loopback reachable."""
    loopback_only(monkeypatch)
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_BASE", model_server.openai_base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("LITELLM_LOCAL_MODEL_COST_MAP", raising=False)  # goldenloop's own setting is under test
    return model_server


def project(repo: Path, **executor: Any) -> Path:
    return agent_project(repo, "aider", **{"agentModel": "openai/scripted", **executor})


def test_aider_fixes_the_repository_and_its_tokens_are_counted_with_the_cost_unknown(
    git_repo: Path, aider_env: ModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    aider_env.script([Turn(reply=whole(FIXED), usage=Usage(1200, 30, cache_read_tokens=200))])
    repo = project(git_repo)

    assert do_one_task(repo) == 0

    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    (sha,) = tasks_on_disk(repo)["T-1"]["commits"]
    assert git(repo, "show", "--name-only", "--format=", sha).split() == ["calc.py"]
    assert (repo / "calc.py").read_text() == FIXED
    assert git(repo, "status", "--porcelain") == ""  # no chat history, cache or .gitignore edit left
    [call] = events_of(repo, "model_call")
    assert (call["inputTokens"], call["outputTokens"], call.get("costUsd"), call["costKnown"]) == (
        1200, 30, None, False)
    out = capsys.readouterr().out
    assert "cost unknown" in out and "$0.0000" not in out
    assert "1 agent run(s) (1 model request(s)), 0 model call(s) of goldenloop's own" in out
    assert len(aider_env.model_requests()) == 1  # goldenloop commits: no commit-message call
    kept = transcript(repo)
    assert "Applied edit to calc.py" in kept and "## chat.md" in kept and "Here is the fix." in kept


def test_a_wrong_edit_is_retried_with_the_failing_test_never_the_command_line(
    git_repo: Path, aider_env: ModelServer
) -> None:
    aider_env.script([Turn(reply=whole(WRONG)), Turn(reply=whole(FIXED))])
    repo = project(git_repo)

    assert do_one_task(repo) == 0

    assert [e["attempt"] for e in events_of(repo, "agent_run")] == [1, 2]
    first, retry = aider_env.prompts()
    assert "assert 0 == 5" not in first and "assert 0 == 5" in retry  # what the tests said of attempt 1
    assert "--message-file" not in retry and "--yes-always" not in retry


def test_a_long_task_is_one_model_call_not_a_second_to_summarise_a_chat_that_ends(
    git_repo: Path, aider_env: ModelServer
) -> None:
    # A bug report as users paste them: the traceback and the log around it. Past 1024
    # tokens of chat Aider would summarise the chat in the background as its run ends.
    log = "".join(f"2026-11-28 23:{i % 60:02d}:07 INFO calc: add({i}, {i + 1}) -> -1 (order {i})\n" for i in range(120))
    report = ("add() in calc.py returns the wrong result; make tests pass.\n\nFrom last night's batch:\n\n"
              f"```\n{log}```\n")
    aider_env.script([Turn(reply=whole(FIXED))])
    repo = project(git_repo)
    tasks = repo / ".openagents" / "tasks.jsonl"
    tasks.write_text(json.dumps(task(description=report)) + "\n")
    git(repo, "commit", "-qam", "a long bug report")

    assert do_one_task(repo) == 0

    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert len(aider_env.model_requests()) == 1  # the fix; no summary of a chat no one continues


def test_goldenloop_reflects_with_the_agents_own_model_where_the_agent_is_served(
    git_repo: Path, aider_env: ModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    # No defaultModel: the user named only the agent's model, on a local server.
    aider_env.script([Turn(reply=whole(WRONG)), Turn(reply=REFLECTION), Turn(reply=whole(FIXED)),
                      Turn(match="How the task ended", reply=json.dumps(SUCCESS))])
    repo = project(git_repo, config={"defaultModel": None, "reflexion": {"useLLM": True}})

    assert do_one_task(repo) == 0

    assert [r.model for r in aider_env.model_requests()] == ["scripted"] * 4  # never gpt-4o-mini
    [reflection] = reflection_lines(repo)
    assert (reflection["source"], reflection["model"]) == ("llm", "openai/scripted")
    assert "abs()" in reflection["analysis"]
    [success] = outcome_lines(repo)
    assert (success["source"], success["model"]) == ("llm", "openai/scripted")
    assert "goldenloop's own reflections use the agent's model, openai/scripted" in capsys.readouterr().out


def test_the_agents_key_goldenloop_cannot_see_leaves_its_reflections_heuristic_not_the_run_refused(
    git_repo: Path, aider_env: ModelServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")  # Aider gets it its own way (here its flag; often a .env file)
    aider_env.script([Turn(reply=whole(WRONG)), Turn(reply=whole(FIXED))])
    repo = project(git_repo, config={"defaultModel": None, "reflexion": {"useLLM": True}},
                   extraArgs=["--openai-api-key", "sk-test"])

    assert do_one_task(repo) == 0

    assert len(aider_env.model_requests()) == 2 and [r["source"] for r in reflection_lines(repo)] == ["heuristic"]
    assert ("goldenloop's own reflections are heuristic, with no model call: the agent's model 'openai/scripted' "
            "needs OPENAI_API_KEY, which is not set in goldenloop's environment") in capsys.readouterr().out


def test_with_no_model_named_goldenloop_calls_none_and_says_so_once(
    git_repo: Path, aider_env: ModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    aider_env.script([Turn(reply=whole(WRONG)), Turn(reply=whole(FIXED))])
    # Aider picks its default model for the key it finds; goldenloop has no model to call.
    repo = project(git_repo, config={"defaultModel": None, "reflexion": {"useLLM": True}}, agentModel=None,
                   extraArgs=["--edit-format", "whole"])

    assert do_one_task(repo) == 0

    assert len(aider_env.model_requests()) == 2  # the two attempts; no reflection call
    assert [r["source"] for r in reflection_lines(repo)] == ["heuristic"]
    out = capsys.readouterr().out
    assert out.count("goldenloop's own reflections are heuristic, with no model call") == 1


def test_a_task_that_names_no_file_gets_aider_the_files_in_play_at_once(git_repo: Path, aider_env: ModelServer) -> None:
    aider_env.script([Turn(reply=whole(FIXED))])
    aider_env.fallback = Turn(reply=whole(FIXED))  # what a second request for the same fix would get
    repo = project(git_repo)
    (repo / ".openagents" / "tasks.jsonl").write_text(json.dumps(task(
        description="The sum of two numbers comes out wrong; the failing tests say how.")) + "\n")
    git(repo, "commit", "-qam", "a task that names no file")

    assert do_one_task(repo) == 0

    [request] = aider_env.model_requests()  # not a second one, after Aider asked for the file
    sent = json.dumps(request.body)
    assert "def add(a, b):" in sent and "def test_add():" in sent  # the code and its failing test, in its chat


def test_an_empty_reply_is_aider_giving_up_and_the_retry_is_told_so(git_repo: Path, aider_env: ModelServer) -> None:
    aider_env.script([Turn(reply=""), Turn(reply=whole(FIXED))])
    repo = project(git_repo)

    assert do_one_task(repo) == 0

    [gave_up] = events_of(repo, "edit_failed")
    assert (gave_up["failureKind"], gave_up["error"]) == (
        "agent", "aider: Empty response received from LLM. Check your provider account?")
    assert events_of(repo, "verdict")[0]["attempt"] == 2  # no tests were run on attempt 1
    retry = aider_env.prompts()[1]
    assert "Empty response received from LLM" in retry and "--message-file" not in retry


def test_an_empty_reply_on_two_runs_in_a_row_is_the_environment_not_four_retries(
    git_repo: Path, aider_env: ModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    aider_env.fallback = Turn(reply="")  # a server that answers nothing, however asked
    repo = project(git_repo, config={"reflexion": {"maxRetries": 3}})

    assert do_one_task(repo) == 1

    assert tasks_on_disk(repo)["T-1"]["status"] == "blocked"
    assert len(events_of(repo, "agent_run")) == 2 and len(aider_env.model_requests()) == 2
    out = capsys.readouterr().out
    said = "aider: Empty response received from LLM. Check your provider account?"
    assert f"the agent cannot run here: {said} (on two runs in a row: no retry changes it)" in out
    assert "attempt 3" not in out


def test_a_refused_key_blocks_the_task_at_once_in_aiders_words(
    git_repo: Path, aider_env: ModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    aider_env.override = Turn(error="auth")
    repo = project(git_repo)

    assert do_one_task(repo) == 1

    assert tasks_on_disk(repo)["T-1"]["status"] == "blocked"
    assert len(aider_env.model_requests()) == 1 and len(events_of(repo, "agent_run")) == 1
    assert events_of(repo, "model_call") == []
    out = capsys.readouterr().out
    assert ("the agent cannot run here: aider: litellm.AuthenticationError: AuthenticationError: OpenAIException - "
            "Incorrect API key provided.") in out
    assert "--message-file" not in out


def test_an_outage_is_told_as_one_teaches_nothing_and_its_attempt_keeps_its_number(
    git_repo: Path, aider_env: ModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    aider_env.override = Turn(error="auth")
    repo = project(git_repo)
    assert do_one_task(repo) == 1  # blocked: the environment
    said = "aider: litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect API key provided."
    packet = (repo / ".openagents" / "escalations" / "T-1.md").read_text()
    assert "The loop stopped after 1 attempt(s): the environment stopped it, and no retry can help." in packet
    assert f"## Last failure\n\nthe agent cannot run here: {said}" in packet and "unknown" not in packet
    aider_env.override = None
    aider_env.script([Turn(reply=whole(FIXED))])
    capsys.readouterr()

    assert goldenloop(repo, "reopen", "T-1") == 0
    assert do_one_task(repo) == 0
    run = capsys.readouterr().out
    assert goldenloop(repo, "show", "T-1") == 0
    shown = capsys.readouterr().out

    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert outcome_lines(repo) == []  # it passed at its first real attempt: no lesson, no playbook
    assert not list((repo / ".openagents" / "memory" / "reflections").rglob("*.md"))
    assert "[T-1.1] attempt 2, up to 1 retry" in run  # the number show gives it
    assert "attempt 2: passed" in shown and "status closed" in shown
    assert "blocked until" not in shown and "an earlier escalation, before the task closed" in shown


@pytest.mark.slow  # Aider retries a refused connection for a minute before it gives up
def test_a_server_that_is_down_blocks_the_task_at_once_in_aiders_words(
    git_repo: Path, aider_env: ModelServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_BASE", f"http://127.0.0.1:{closed_port()}/v1")
    repo = project(git_repo)

    assert do_one_task(repo) == 1

    assert tasks_on_disk(repo)["T-1"]["status"] == "blocked"
    assert len(events_of(repo, "agent_run")) == 1 and events_of(repo, "model_call") == []
    out = capsys.readouterr().out
    assert ("the agent cannot run here: aider: litellm.InternalServerError: InternalServerError: OpenAIException - "
            "Connection error.") in out
    assert "--message-file" not in out
