"""How an agent run ended, read from what it printed: done, gave up, or the environment.

The outputs are the kinds of lines real agents print (see docs/AGENTS.md); the rules are
goldenloop's own, so they are checked here on recorded text, one case each.
"""

from __future__ import annotations

import pytest

from orchestrator.checks.verify import CommandResult
from orchestrator.executors.agent_end import diagnose, refused_again
from orchestrator.executors.presets import PRESETS, Report

PROMPT = "# Task T-1: Fix add\n" + "the whole prompt " * 50


def finished(output: str, exit_code: int = 0, **extra: object) -> CommandResult:
    command = f"claude -p '{PROMPT}' --output-format json"
    return CommandResult(command=command, kind="agent", exit_code=exit_code, output=output, **extra)


@pytest.mark.parametrize(
    ("agent", "output", "exit_code", "report", "kind", "sentence"),
    [
        ("aider", "Applied edit to calc.py\nTokens: 1.2k sent, 80 received.\n", 0, Report(), "done", ""),
        ("claude-code", '{"type":"result","is_error":true,"result":"Not logged in · Please run /login"}', 1,
         Report(is_error=True, final_message="Not logged in · Please run /login"), "environment",
         "Not logged in · Please run /login"),
        ("aider", "litellm.APIConnectionError: OpenAIException - Connection error.\n", 1, Report(), "environment",
         "litellm.APIConnectionError: OpenAIException - Connection error."),
        ("aider", "Empty response received from LLM. Check your provider account?\n", 0, Report(), "agent",
         "Empty response received from LLM. Check your provider account?"),
        ("mini-swe-agent", "Welcome! Let's set up mini.\nAborted.\n", 1, Report(), "environment", "Aborted."),
        ("codex", "ERROR: unexpected status 404 Not Found: http://127.0.0.1:9/v1/responses\n", 1, Report(),
         "environment", "ERROR: unexpected status 404 Not Found: http://127.0.0.1:9/v1/responses"),
        ("claude-code", '{"type":"result","is_error":true,"result":"I could not make the tests pass."}', 1,
         Report(is_error=True, final_message="I could not make the tests pass."), "agent",
         "I could not make the tests pass."),
        ("aider", "Traceback (most recent call last):\n  ...\nValueError: bad edit block\nbye\n", 2, Report(),
         "agent", "ValueError: bad edit block"),
    ],
)
def test_an_agent_runs_end_is_read_from_its_own_words(
    agent: str, output: str, exit_code: int, report: Report, kind: str, sentence: str
) -> None:
    end = diagnose(PRESETS[agent], finished(output, exit_code), report, timeout_s=900)
    assert (end.kind, end.sentence) == (kind, sentence)
    assert "the whole prompt" not in end.sentence  # never the command line


def test_words_of_failure_in_a_run_that_succeeded_are_the_agents_business() -> None:
    # The agent ran the tests, which printed a 401 of the code under test: it exited 0.
    output = "FAILED test_client.py::test_login - 401 Unauthorized: invalid api key\nAll done.\n"
    assert diagnose(PRESETS["aider"], finished(output), Report(), timeout_s=900).kind == "done"


def test_a_timeout_names_the_limit_and_a_missing_program_is_the_environment() -> None:
    timed_out = finished("working...\n", exit_code=None, timed_out=True)
    end = diagnose(PRESETS["aider"], timed_out, Report(), timeout_s=60)
    assert (end.kind, end.sentence) == ("agent", "the agent run was stopped after the 60 s limit "
                                                 "(executor.timeoutSeconds)")
    missing = finished("sh: 1: aider: not found\n", exit_code=127)
    assert diagnose(PRESETS["aider"], missing, Report(), timeout_s=60).kind == "environment"


def test_a_secret_in_the_agents_last_word_is_redacted() -> None:
    output = "Error: 401 Unauthorized for key sk-ant-api03-" + "A" * 80 + "\n"
    end = diagnose(PRESETS["claude-code"], finished(output, 1), Report(), timeout_s=60)
    assert end.kind == "environment" and "AAAAAAAA" not in end.sentence


@pytest.mark.parametrize(("sentence", "before", "again"), [
    ("the agent run failed: aider: Empty response received from LLM.", "the agent run failed: aider: "
     "Empty response received from LLM.", True),
    ("the agent run failed: litellm.BadRequestError: 400 context length", "the agent run failed: litellm."
     "BadRequestError: 400 context length", True),
    ("the agent run failed: litellm.BadRequestError: 400 a", "the agent run failed: litellm.BadRequestError: 400 b",
     False),  # a different refusal: the retry's prompt changed something
    ("the agent run failed: it exited with code 1", "the agent run failed: it exited with code 1", False),
    ("the agent run failed: AssertionError: assert 404 == 200", "the agent run failed: AssertionError: assert 404 "
     "== 200", False),  # the code's failure, twice: a retry may still fix it
    ("the agent run failed: Error code: 429 - quota", "the agent run failed: Error code: 429 - quota", True),
    ("the agent run failed: aider: Empty response received from LLM.", None, False),
])
def test_the_same_refusal_twice_in_a_row_is_told_apart(sentence: str, before: str | None, again: bool) -> None:
    assert refused_again(sentence, before) is again


def test_claude_codes_rejected_rate_limit_event_is_a_usage_limit_with_its_reset() -> None:
    event = ('{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1764435600,'
             '"rateLimitType":"five_hour"},"uuid":"5b9f","session_id":"2c1e"}')
    result = ('{"type":"result","subtype":"success","is_error":true,"num_turns":1,'
              '"result":"You\'ve hit your limit · resets 5pm (UTC)","session_id":"2c1e","total_cost_usd":0}')
    report = Report(is_error=True, final_message="You've hit your limit · resets 5pm (UTC)")

    end = diagnose(PRESETS["claude-code"], finished(f"{event}\n{result}\n", exit_code=1), report, 900)

    assert (end.kind, end.resets_at) == ("limit", 1764435600.0)
    assert end.sentence.startswith("its five_hour limit is reached; it resets at 2025-11-29 ")
