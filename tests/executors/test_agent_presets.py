"""Coding agents as executors, end to end: fake `claude`, `codex`, `aider` and `mini`
programs on PATH parse their arguments like the real ones, edit calc.py (wrong first,
right second) and report in their documented formats."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from projects import CALC, do_one_task, events_of, git, make_project, tasks_on_disk

from orchestrator.loop.attempt_history import read_attempts

FIXED = CALC.replace("a - b", "a + b")
WRONG = CALC.replace("a - b", "0")

FAKE = r'''
import argparse, json, os, pathlib, subprocess, sys
name, args = sys.argv[1], sys.argv[2:]
state = pathlib.Path(os.environ["FAKE_STATE"])
runs = state / "runs"
n = int(runs.read_text()) + 1 if runs.exists() else 1
runs.write_text(str(n))
memory = {m: pathlib.Path(m).read_text() for m in ("CLAUDE.md", "AGENTS.md") if pathlib.Path(m).exists()}
with (state / "calls.jsonl").open("a") as log:
    log.write(json.dumps({"name": name, "argv": args, "memory": memory}) + "\n")
pathlib.Path("calc.py").write_text((state / ("wrong" if n == 1 else "fixed")).read_text())
cost = float(os.environ.get("FAKE_COST", "0.3"))
p = argparse.ArgumentParser()
if name == "claude":
    for flag in ("-p", "--output-format", "--max-turns", "--permission-mode", "--append-system-prompt",
                 "--max-budget-usd", "--model"):
        p.add_argument(flag)
    a = p.parse_args(args)
    assert a.p and a.output_format == "json"
    print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "num_turns": 3,
                      "result": f"fixed add, run {n}", "session_id": f"sess-{n}", "total_cost_usd": cost,
                      "usage": {"input_tokens": 1000, "output_tokens": 200}}))
elif name == "codex":
    assert args[0] == "exec"
    for flag in ("--sandbox", "--output-last-message", "--model"):
        p.add_argument(flag)
    p.add_argument("--disable", action="append")
    p.add_argument("--json", action="store_true")
    p.add_argument("prompt")
    a = p.parse_args(args[1:])
    assert a.json and a.prompt
    pathlib.Path(a.output_last_message).write_text(f"codex done {n}")
    for event in ({"type": "thread.started", "thread_id": f"thread-{n}"}, {"type": "turn.started"},
                  {"type": "turn.completed", "usage": {"input_tokens": 500, "cached_input_tokens": 0,
                                                       "output_tokens": 50}}):
        print(json.dumps(event))
elif name == "aider":
    for flag in ("--message-file", "--chat-history-file", "--input-history-file", "--read", "--model",
                 "--max-chat-history-tokens"):
        p.add_argument(flag)
    p.add_argument("--file", action="append")
    for flag in ("--yes-always", "--no-pretty", "--no-gitignore", "--no-show-release-notes", "--no-analytics",
                 "--no-check-update", "--no-show-model-warnings", "--no-detect-urls", "--no-auto-commits", "--no-stream"):
        p.add_argument(flag, action="store_true")
    a = p.parse_args(args)
    assert pathlib.Path(a.message_file).read_text() and a.yes_always
    pathlib.Path(".aider.tags.cache.v4").mkdir(exist_ok=True)  # its repo map's cache
    (pathlib.Path(".aider.tags.cache.v4") / "cache.db").write_text("tags")
    print(f"Tokens: 2.1k sent, 150 received. Cost: ${cost:.4f} message, ${cost * n:.4f} session.")
    subprocess.run(["git", "add", "-A", "--", "."], check=True)
    subprocess.run(["git", "commit", "-qm", "aider: fix add"], check=True)
elif name == "mini":
    for flag in ("-t", "-o", "--cost-limit", "--model"):
        p.add_argument(flag)
    p.add_argument("-c", action="append")
    for flag in ("--yolo", "--exit-immediately"):
        p.add_argument(flag, action="store_true")
    a = p.parse_args(args)
    pathlib.Path(a.o).write_text(json.dumps({"info": {"exit_status": "Submitted", "submission": "done",
                                                      "model_stats": {"instance_cost": cost, "api_calls": 4}}}))
'''


@pytest.fixture
def agents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A bin folder with the fake agents first on PATH; returns the fakes' state folder."""
    state, bin_dir = tmp_path / "state", tmp_path / "bin"
    state.mkdir()
    bin_dir.mkdir()
    (state / "wrong").write_text(WRONG)
    (state / "fixed").write_text(FIXED)
    script = tmp_path / "fake_agent.py"
    script.write_text(FAKE)
    for name in ("claude", "codex", "aider", "mini"):
        program = bin_dir / name
        program.write_text(f'#!/bin/sh\nexec {sys.executable} {script} {name} "$@"\n')
        program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_STATE", str(state))
    return state


def project(repo: Path, kind: str, **config: Any) -> Path:
    executor = {"kind": kind, **config.pop("executor", {})}
    files = config.pop("files", None)
    settings = {"executor": executor, "reflexion": {"useLLM": False}, **config}
    return make_project(repo, [], config=settings, files=files)


def calls(state: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (state / "calls.jsonl").read_text().splitlines()]


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_claude_code_closes_the_task_its_cost_counted_and_its_budget_flag_the_tasks_remaining(
    git_repo: Path, agents: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = project(git_repo, "claude-code", maxCostUsdPerTask=2.0)

    assert do_one_task(repo) == 0

    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert "cost $0.6000" in capsys.readouterr().out  # two attempts at $0.30
    first, second = calls(agents)
    assert flag(first["argv"], "--max-budget-usd") == "2.0000"
    assert flag(second["argv"], "--max-budget-usd") == "1.7000"  # what the first attempt left
    assert flag(first["argv"], "--max-turns") == "30"
    assert flag(first["argv"], "--permission-mode") == "acceptEdits"
    assert "never push" in flag(first["argv"], "--append-system-prompt").lower()
    prompt = flag(first["argv"], "-p")  # an agent explores on its own: it is told what will judge it
    assert "## How the work is checked" in prompt and "test_calc.py" in prompt
    runs = events_of(repo, "agent_run")
    assert [(e["sessionId"], e["finalMessage"]) for e in runs] == [("sess-1", "fixed add, run 1"),
                                                                    ("sess-2", "fixed add, run 2")]
    history = read_attempts(repo, "T-1")
    assert [a.extra["sessionId"] for a in history] == ["sess-1", "sess-2"]


def test_without_a_budget_no_budget_flag_is_passed_and_settings_reach_the_agent(
    git_repo: Path, agents: Path
) -> None:
    repo = project(git_repo, "claude-code",
                   executor={"maxTurns": 7, "permissionMode": "bypassPermissions", "agentModel": "opus"})

    assert do_one_task(repo) == 0

    argv = calls(agents)[0]["argv"]
    assert "--max-budget-usd" not in argv
    assert (flag(argv, "--max-turns"), flag(argv, "--permission-mode"), flag(argv, "--model")) == (
        "7", "bypassPermissions", "opus")


def test_codex_reports_no_cost_so_the_cost_shows_as_unknown(
    git_repo: Path, agents: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = project(git_repo, "codex")

    assert do_one_task(repo) == 0

    out = capsys.readouterr().out
    assert "cost unknown" in out and "cost $0" not in out
    assert "1000 tokens in (cache not reported), 100 out" in out  # its tokens are counted all the same
    runs = events_of(repo, "agent_run")
    assert [(e["sessionId"], e["finalMessage"], e.get("costUsd")) for e in runs] == [
        ("thread-1", "codex done 1", None), ("thread-2", "codex done 2", None)]
    assert [e["costKnown"] for e in events_of(repo, "model_call")] == [False, False]
    assert "--max-budget-usd" not in calls(agents)[0]["argv"]


def test_aider_commits_its_own_work_and_its_cost_line_is_counted(
    git_repo: Path, agents: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = project(git_repo, "aider")
    base = git(repo, "rev-parse", "HEAD").strip()

    assert do_one_task(repo) == 0

    assert "cost $0.6000" in capsys.readouterr().out
    assert len(events_of(repo, "agent_commits_folded")) == 2
    assert "aider: fix add" not in git(repo, "log", "--format=%s", f"{base}..HEAD")
    assert git(repo, "status", "--porcelain") == ""
    assert not (repo / ".aider.tags.cache.v4").exists()  # its cache is not the attempt's work
    (sha,) = tasks_on_disk(repo)["T-1"]["commits"]
    assert git(repo, "show", "--name-only", "--format=", sha).split() == ["calc.py"]


def test_mini_swe_agent_cost_is_read_from_its_trajectory(
    git_repo: Path, agents: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = project(git_repo, "mini-swe-agent", maxCostUsdPerTask=5.0)

    assert do_one_task(repo) == 0

    assert "cost $0.6000" in capsys.readouterr().out
    assert flag(calls(agents)[1]["argv"], "--cost-limit") == "4.7000"


def test_an_agent_reporting_more_than_the_budget_stops_the_task_before_another_attempt(
    git_repo: Path, agents: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FAKE_COST", "1.2")
    repo = project(git_repo, "claude-code", maxCostUsdPerTask=1.0)

    assert do_one_task(repo) == 1

    assert len(calls(agents)) == 1  # the first attempt failed; no second one was started
    assert len(events_of(repo, "attempt_started")) == 1
    out = capsys.readouterr().out
    assert "T-1 budget: 1 attempt(s)" in out and "cost $1.2000" in out
    assert "reason: task cost budget: $1.2000 spent of $1.0000" in out
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"  # put back, for a run with budget left


def test_memory_file_carries_the_reflections_and_is_put_back_unchanged(git_repo: Path, agents: Path) -> None:
    repo = project(git_repo, "claude-code", executor={"memoryFile": True},
                   files={"CLAUDE.md": "# House rules\nUse tabs.\n"})
    before = (repo / "CLAUDE.md").read_bytes()

    assert do_one_task(repo) == 0

    first, second = calls(agents)
    assert first["memory"]["CLAUDE.md"] == before.decode()  # no reflections before a retry
    assert second["memory"]["CLAUDE.md"].startswith("# House rules\nUse tabs.\n")
    assert "## Reflections from Previous Attempts" in second["memory"]["CLAUDE.md"]
    assert (repo / "CLAUDE.md").read_bytes() == before
    assert git(repo, "status", "--porcelain") == ""
    (sha,) = tasks_on_disk(repo)["T-1"]["commits"]
    assert "CLAUDE.md" not in git(repo, "show", "--name-only", "--format=", sha)


def test_an_agent_that_is_not_installed_is_a_config_error_before_any_attempt(
    git_repo: Path, agents: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = project(git_repo, "claude-code", executor={"program": "no-such-claude-xyz"})

    assert do_one_task(repo) == 2

    err = capsys.readouterr().err
    assert err.startswith("do-one-task: the agent program 'no-such-claude-xyz' is not installed here")
    assert err.endswith("fix executor.program in .openagents/project.json\n") and err.count("\n") == 1
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"
    assert not (agents / "calls.jsonl").exists() and events_of(repo, "attempt_started") == []


def test_reports_read_the_documented_outputs_and_leave_the_unsaid_unknown(tmp_path: Path) -> None:
    from orchestrator.executors.presets import PRESETS, Scratch

    scratch = Scratch(tmp_path)
    aider = PRESETS["aider"].parse("Tokens: 2.1k sent, 150 received. Cost: $0.0012 message, $0.0100 session.\n"
                                   "Tokens: 1.5M sent, 1k received. Cost: $0.0100 message, $0.0110 session.",
                                   scratch)
    assert (aider.input_tokens, aider.output_tokens, aider.cost_usd) == (1_502_100, 1150, pytest.approx(0.0112))
    assert PRESETS["aider"].parse("Applied edit to calc.py", scratch).cost_usd is None
    assert PRESETS["claude-code"].parse("not json at all", scratch).cost_usd is None
    assert PRESETS["mini-swe-agent"].parse("", scratch).cost_usd is None  # no trajectory written


def test_a_presets_reflections_are_filed_under_the_agent_not_an_unused_model() -> None:
    from orchestrator.config import ProjectConfig
    from orchestrator.loop.project_memory import agent_name

    config = ProjectConfig.model_validate({"executor": {"kind": "claude-code"}})
    assert agent_name(config) == "claude-code"  # not defaultModel, which no call used


def test_openhands_last_word_is_its_finish_or_its_error_and_its_usage_is_in_the_saved_conversation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenHands 1.16's `--json` events and closing lines; its usage is only in base_state.json."""
    from orchestrator.executors.presets import PRESETS, Report, Scratch

    conversation = "1aa4cb01b9e2426b945b44cbb0a533df"
    monkeypatch.setenv("OPENHANDS_CONVERSATIONS_DIR", str(tmp_path))
    (tmp_path / conversation).mkdir()
    metrics = {"agent": {"model_name": "openai/x", "accumulated_cost": 0.0004, "costs": [{"cost": 0.0004}],
                         "accumulated_token_usage": {"prompt_tokens": 2300, "completion_tokens": 70}},
               "condenser": {"accumulated_cost": 0.0, "costs": [],
                             "accumulated_token_usage": {"prompt_tokens": 0, "completion_tokens": 0}}}
    state = {"agent": {"llm": {"model": "openai/gpt-4o-mini"}}, "stats": {"usage_to_metrics": metrics}}
    (tmp_path / conversation / "base_state.json").write_text(json.dumps(state))
    said = {"kind": "MessageEvent", "source": "agent", "llm_message": {"content": [{"type": "text", "text": "On it."}]}}
    finish = {"kind": "ActionEvent", "source": "agent", "action": {"message": "add() is fixed.", "kind": "FinishAction"}}
    closing = f"Goodbye! 👋\nConversation ID: {conversation}\nHint: run openhands --resume ..."
    output = "\n".join([json.dumps(said), json.dumps(finish), closing])

    assert PRESETS["openhands"].parse(output, Scratch(tmp_path)) == Report(
        input_tokens=2300, output_tokens=70, cost_usd=0.0004, model="openai/gpt-4o-mini", session_id=conversation,
        final_message="add() is fixed.")
    for entry in metrics.values():  # an unpriced model: $0 and no cost entry
        entry.update(accumulated_cost=0.0, costs=[])
    (tmp_path / conversation / "base_state.json").write_text(json.dumps(state))
    error = {"kind": "ConversationErrorEvent", "source": "environment", "code": "LLMBadRequestError",
             "detail": "litellm.BadRequestError: OpenAIException - Invalid request."}
    failed = PRESETS["openhands"].parse("\n".join([json.dumps(said), json.dumps(error), closing]), Scratch(tmp_path))
    assert (failed.is_error, failed.cost_usd, failed.input_tokens) == (True, None, 2300)
    assert failed.final_message == "LLMBadRequestError: litellm.BadRequestError: OpenAIException - Invalid request."
