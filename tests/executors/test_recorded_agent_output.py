"""What Claude Code and Codex really print, read back: recorded from Claude Code 2.1.197 and
Codex CLI 0.169.0 run against the scripted model server (tests/fixtures/agents/; ports and
temporary paths replaced). Each output's report (tokens, cost, session, last word) and end
(done, the agent gave up, the environment), in the agent's own sentence."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.checks.verify import CommandResult
from orchestrator.executors.agent_end import diagnose
from orchestrator.executors.presets import PRESETS, Report, Scratch

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "agents"


def read_back(kind: str, name: str, tmp_path: Path) -> tuple[Report, tuple[str, str]]:
    output = (RECORDED / kind / name).read_text()
    exit_code = 0 if name.startswith("edited") else 1  # as each program exited
    report = PRESETS[kind].parse(output, Scratch(tmp_path))  # no last-message file: the events say it
    end = diagnose(PRESETS[kind], CommandResult(command=kind, kind="agent", exit_code=exit_code, output=output),
                   report, 60)
    return report, (end.kind, end.sentence)


def test_claude_codes_result_gives_all_its_calls_tokens_its_cost_and_its_last_word(tmp_path: Path) -> None:
    report, end = read_back("claude-code", "edited.json", tmp_path)

    assert report == Report(input_tokens=3300, output_tokens=110, cost_usd=0.01925, model="claude-opus-4-8[1m]",
                            session_id="1374d0b0-08f2-4865-9bc1-1b7c95eafc1d",
                            final_message="add() returns a + b now.", requests=3)  # its three turns
    assert end == ("done", "")


def test_a_budget_stop_counts_every_call_though_its_usage_field_holds_the_first_only(tmp_path: Path) -> None:
    report, end = read_back("claude-code", "max-budget.json", tmp_path)

    assert (report.input_tokens, report.output_tokens, report.cost_usd) == (2000, 80, 0.012)
    assert end == ("agent", "Reached maximum budget ($0.01)")


def test_codexs_events_give_tokens_the_thread_and_its_last_word_and_no_cost(tmp_path: Path) -> None:
    report, end = read_back("codex", "edited.jsonl", tmp_path)

    assert report == Report(input_tokens=2100, output_tokens=60, cost_usd=None,
                            session_id="01a215e9-f04e-7680-933c-1c0c65cf06ad",
                            final_message="add() returns a + b now.")
    assert end == ("done", "")


@pytest.mark.parametrize(
    ("kind", "name", "end"),
    [
        ("claude-code", "max-turns.json", ("agent", "Reached maximum number of turns (2)")),
        ("claude-code", "not-logged-in.json", ("environment", "Not logged in · Please run /login")),
        ("claude-code", "connection-refused.json",
         ("environment", "API Error: Unable to connect to API (ConnectionRefused)")),
        ("claude-code", "invalid-api-key.json", ("environment", "Invalid API key · Fix external API key")),
        ("claude-code", "model-not-found.json",
         ("environment", ("There's an issue with the selected model (claude-opus-4-8[1m]). It may not exist or "
                          "you may not have access to it. Run --model to pick a different model."))),
        ("codex", "context-window.jsonl",
         ("agent", ("Codex ran out of room in the model's context window. Start a new thread or clear earlier "
                    "history before retrying."))),
        ("codex", "connection-failed.jsonl", ("environment", "Connection failed: error sending request")),
        ("codex", "unauthorized.jsonl",
         ("environment", ("unexpected status 401 Unauthorized: Incorrect API key provided., url: "
                          "http://127.0.0.1:8080/v1/responses, request id: req_1"))),
        ("codex", "no-responses-api.jsonl",
         ("environment", ("unexpected status 404 Not Found: model_server: no endpoint POST /v1/responses, url: "
                          "http://127.0.0.1:8080/v1/responses, request id: req_1"))),
        ("codex", "missing-key.jsonl", ("environment", "Missing environment variable: `LOCAL_MODEL_API_KEY`.")),
        ("codex", "wire-api-chat.txt",
         ("environment", 'Error loading config.toml: `wire_api = "chat"` is no longer supported.')),
    ],
)
def test_each_failure_ends_in_the_agents_own_sentence(kind: str, name: str, end: tuple[str, str],
                                                      tmp_path: Path) -> None:
    assert read_back(kind, name, tmp_path)[1] == end


def test_a_run_that_never_reached_a_model_reports_nothing_spent(tmp_path: Path) -> None:
    claude, _ = read_back("claude-code", "connection-refused.json", tmp_path)
    codex, _ = read_back("codex", "connection-failed.jsonl", tmp_path)

    assert (claude.input_tokens, claude.output_tokens, claude.cost_usd) == (0, 0, 0.0)
    assert (codex.input_tokens, codex.output_tokens, codex.cost_usd) == (None, None, None)
