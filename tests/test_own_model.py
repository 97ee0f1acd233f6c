"""Which model goldenloop's own calls use when an agent does the work: only one the user
named, never a hosted default (docs/AGENTS.md, "goldenloop's own model calls")."""

from __future__ import annotations

from pathlib import Path

import pytest
from projects import CALC, do_one_task, events_of, make_project, reflection_lines, tasks_on_disk

from orchestrator.config import ProjectConfig, load_config

HOSTED_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOLDENLOOP_MODEL", "GOLDENLOOP_REFLECTION_MODEL")


def own_model(settings: dict) -> str | None:
    return ProjectConfig.model_validate(settings).own_model


def test_only_a_model_the_user_named_is_goldenloops_own() -> None:
    assert own_model({}) == "gpt-4o-mini"  # the builtin editor's model does the work itself
    assert own_model({"executor": {"kind": "aider"}}) is None
    assert own_model({"executor": {"kind": "command", "command": "agent {prompt_file}"}}) is None
    assert own_model({"executor": {"kind": "aider", "agentModel": "ollama/qwen2.5-coder"}}) == "ollama/qwen2.5-coder"
    assert own_model({"executor": {"kind": "aider", "extraArgs": ["--model", "openai/local"]}}) == "openai/local"
    assert own_model({"executor": {"kind": "mini-swe-agent", "extraArgs": ["--model=openai/local"]}}) == "openai/local"
    assert own_model({"defaultModel": "gpt-4o", "executor": {"kind": "aider", "agentModel": "openai/x"}}) == "gpt-4o"
    assert own_model({"model": {"name": "claude-haiku-4-5"}, "executor": {"kind": "codex"}}) == "claude-haiku-4-5"


def test_goldenloop_model_in_the_environment_is_a_model_named(tmp_path: Path) -> None:
    (tmp_path / ".openagents").mkdir()
    (tmp_path / ".openagents" / "project.json").write_text('{"executor": {"kind": "aider"}}')

    loaded = load_config(tmp_path, env={"GOLDENLOOP_MODEL": "ollama/llama3"})

    assert loaded.config.own_model == "ollama/llama3"


def test_a_command_agent_runs_with_no_key_and_goldenloop_calls_no_model(
    git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in HOSTED_KEYS:
        monkeypatch.delenv(name, raising=False)
    fixed, count = tmp_path / "fixed.py", tmp_path / "attempts"
    fixed.write_text(CALC.replace("a - b", "a + b"))
    wrong = CALC.replace("a - b", "0").replace("\n", "\\n")
    agent = (f"if [ -e {count} ]; then cp {fixed} calc.py; else touch {count}; printf '{wrong}' > calc.py; fi; "
             "test -s {prompt_file}")
    repo = make_project(git_repo, [], config={"defaultModel": None, "executor": {"kind": "command", "command": agent}})

    assert do_one_task(repo) == 0  # it used to stop at once: model 'gpt-4o-mini' needs OPENAI_API_KEY

    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert events_of(repo, "model_call") == []
    assert [line["source"] for line in reflection_lines(repo)] == ["heuristic"]
    out = capsys.readouterr().out
    assert out.count("goldenloop's own reflections are heuristic, with no model call") == 1


def test_an_agent_that_signs_in_its_own_way_lends_goldenloop_no_model() -> None:
    assert own_model({"executor": {"kind": "claude-code", "agentModel": "sonnet"}}) is None
    assert own_model({"executor": {"kind": "codex", "agentModel": "gpt-5-codex"}}) is None
    assert own_model({"reflexion": {"model": "claude-haiku-4-5"}, "executor": {"kind": "claude-code"}}) is None
    assert ProjectConfig.model_validate({"reflexion": {"model": "claude-haiku-4-5"},
                                         "executor": {"kind": "claude-code"}}).reflection_model == "claude-haiku-4-5"
