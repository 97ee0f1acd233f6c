"""mini-swe-agent, the real program, driven through goldenloop against the scripted model server.

It works in bash tool calls and ends by running `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`;
what it did is read from the trajectory it saves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agentkit import agent_project, transcript
from model_server import ModelServer, ToolCall, Turn, Usage
from offline import closed_port, loopback_only
from programs import needs
from projects import CALC, do_one_task, events_of, git, tasks_on_disk

pytestmark = needs("mini-swe-agent")

FIXED = CALC.replace("a - b", "a + b")


def bash(command: str, reply: str = "Running it.", usage: Usage | None = None) -> Turn:
    return Turn(reply=reply, tool_calls=[ToolCall("bash", {"command": command})], usage=usage)


SUBMIT = bash("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "Done.", Usage(1300, 20))
FIX = bash(f"cat > calc.py <<'EOF'\n{FIXED}EOF", "Fixing add.", Usage(1200, 30))
BREAK = bash("sed -i 's/a - b/0/' calc.py", "Returning zero.")


@pytest.fixture
def mini_env(model_server: ModelServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModelServer:
    """mini-swe-agent pointed at the model server, the way a user points it at a local one,
    with a home of the test's own and nothing but loopback reachable."""
    loopback_only(monkeypatch)
    (tmp_path / "home").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_API_BASE", model_server.openai_base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("MSWEA_GLOBAL_CONFIG_DIR", str(tmp_path / "mini-config"))  # not this machine's own
    monkeypatch.setenv("MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT", "1")  # its own default retries for minutes
    for name in ("MSWEA_CONFIGURED", "MSWEA_COST_TRACKING", "MSWEA_MODEL_NAME", "LITELLM_LOCAL_MODEL_COST_MAP"):
        monkeypatch.delenv(name, raising=False)  # goldenloop's own settings are under test
    return model_server


def project(repo: Path, **executor: Any) -> Path:
    return agent_project(repo, "mini-swe-agent", **{"agentModel": "openai/scripted", **executor})


def test_mini_fixes_the_repository_and_its_trajectorys_tokens_are_counted_with_the_cost_unknown(
    git_repo: Path, mini_env: ModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    mini_env.script([FIX, SUBMIT])
    repo = project(git_repo, maxTurns=7)

    assert do_one_task(repo) == 0

    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    (sha,) = tasks_on_disk(repo)["T-1"]["commits"]
    assert git(repo, "show", "--name-only", "--format=", sha).split() == ["calc.py"]
    assert (repo / "calc.py").read_text() == FIXED
    [call] = events_of(repo, "model_call")
    assert (call["inputTokens"], call["outputTokens"], call.get("costUsd"), call["costKnown"]) == (
        2500, 50, None, False)  # both calls, as the server reported them; litellm cannot price the model
    out = capsys.readouterr().out
    assert "cost unknown" in out and "$0.0000" not in out
    assert call["requests"] == 2 and "1 agent run(s) (2 model request(s))" in out  # its run, and its calls in it
    assert events_of(repo, "agent_run")[0]["finalMessage"] == "Done."
    kept = transcript(repo)
    assert "## trajectory.json" in kept and '"exit_status": "Submitted"' in kept
    assert '"step_limit": 7' in kept  # maxTurns reached it


def test_a_run_stopped_at_the_step_limit_is_judged_by_the_checks_and_the_limit_named(
    git_repo: Path, mini_env: ModelServer
) -> None:
    mini_env.script([FIX, SUBMIT])
    repo = project(git_repo, maxTurns=1)

    assert do_one_task(repo) == 0  # the one step it had fixed add

    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert len(mini_env.model_requests()) == 1
    [run] = events_of(repo, "agent_run")
    assert run["finalMessage"].startswith("LimitsExceeded: stopped after 1 model calls (step limit 1")


def test_a_wrong_edit_is_retried_with_the_failing_test_never_the_command_line(
    git_repo: Path, mini_env: ModelServer
) -> None:
    mini_env.script([BREAK, SUBMIT, FIX, SUBMIT])
    repo = project(git_repo)

    assert do_one_task(repo) == 0

    assert [e["attempt"] for e in events_of(repo, "agent_run")] == [1, 2]
    first, retry = mini_env.prompts()[0], mini_env.prompts()[2]
    assert "assert 0 == 5" not in first and "assert 0 == 5" in retry  # what the tests said of attempt 1
    assert "--yolo" not in retry and "--exit-immediately" not in retry


def test_a_model_without_tool_calls_is_driven_in_its_text_mode_under_goldenloops_step_limit(
    git_repo: Path, mini_env: ModelServer
) -> None:
    """Replies carry the command in a fenced block; the text-mode config sets its own step limit."""
    command = f"```mswea_bash_command\ncat > calc.py <<'EOF'\n{FIXED}EOF\n```"
    mini_env.script([Turn(reply=f"Fixing add.\n\n{command}"),
                     Turn(reply="Done.\n\n```mswea_bash_command\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```")])
    repo = project(git_repo, maxTurns=5,
                   extraArgs=["-c", "mini_textbased.yaml", "--model-class", "litellm_textbased"])

    assert do_one_task(repo) == 0

    assert (repo / "calc.py").read_text() == FIXED
    assert '"step_limit": 5' in transcript(repo) and "LitellmTextbasedModel" in transcript(repo)


@pytest.mark.parametrize("failure", ["down", "auth"])
def test_a_server_down_or_a_refused_key_blocks_the_task_at_once_in_minis_words(
    failure: str, git_repo: Path, mini_env: ModelServer, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    if failure == "down":
        monkeypatch.setenv("OPENAI_API_BASE", f"http://127.0.0.1:{closed_port()}/v1")
    mini_env.override = Turn(error="auth")
    repo = project(git_repo)

    assert do_one_task(repo) == 1

    assert tasks_on_disk(repo)["T-1"]["status"] == "blocked"
    assert len(events_of(repo, "agent_run")) == 1 and events_of(repo, "model_call") == []
    out = capsys.readouterr().out
    said = {"down": "litellm.InternalServerError: InternalServerError: OpenAIException - Connection error.",
            "auth": "litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect API key provided."}
    assert f"the agent cannot run here: mini-swe-agent: {said[failure]}" in out
    assert "--yolo" not in out


def test_its_first_run_wizard_is_the_environment(
    git_repo: Path, mini_env: ModelServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MSWEA_CONFIGURED", "")  # the user's own setting wins over goldenloop's
    repo = project(git_repo)

    assert do_one_task(repo) == 1

    assert tasks_on_disk(repo)["T-1"]["status"] == "blocked" and mini_env.model_requests() == []
    assert "the agent cannot run here: mini-swe-agent: Aborted." in capsys.readouterr().out


def test_empty_replies_are_named_and_on_two_runs_in_a_row_stop_the_task_as_the_environment(
    git_repo: Path, mini_env: ModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    mini_env.fallback = Turn(reply="")  # a server that answers nothing, however asked
    repo = project(git_repo, config={"reflexion": {"maxRetries": 3}})

    assert do_one_task(repo) == 1

    assert tasks_on_disk(repo)["T-1"]["status"] == "blocked"
    assert len(events_of(repo, "agent_run")) == 2  # not four runs of three requests each
    out = capsys.readouterr().out
    assert "the agent cannot run here: mini-swe-agent: empty reply from the model, 3 time(s), then " in out
    assert "(on two runs in a row: no retry changes it)" in out

