"""What Aider and mini-swe-agent really print and save, read back: recorded from Aider 0.86.2
and mini-swe-agent 2.4.6 run with goldenloop's arguments and variables against the scripted
model server (tests/fixtures/agents/; install paths and the kernel's name replaced). Each
run's report (tokens, cost, last word) and end (done, the agent gave up, the environment)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from orchestrator.checks.verify import CommandResult
from orchestrator.executors.agent_end import diagnose
from orchestrator.executors.presets import PRESETS, Report, Scratch

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "agents"


def read_back(kind: str, name: str, exit_code: int, tmp_path: Path) -> tuple[Report, tuple[str, str]]:
    """The report and end of a recorded run; mini-swe-agent's trajectory is put where it saved it."""
    scratch = Scratch(tmp_path)
    trajectory = RECORDED / kind / f"{name}.traj.json"
    if trajectory.exists():
        shutil.copy(trajectory, scratch.trajectory)
    output = (RECORDED / kind / f"{name}.txt").read_text()
    report = PRESETS[kind].parse(output, scratch)
    end = diagnose(PRESETS[kind], CommandResult(command=kind, kind="agent", exit_code=exit_code, output=output),
                   report, 60)
    return report, (end.kind, end.sentence)


def test_aiders_tokens_line_with_prompt_caching_and_its_cost_line_are_read(tmp_path: Path) -> None:
    report, end = read_back("aider", "edited-cached-priced", 0, tmp_path)

    assert (report.input_tokens, report.output_tokens, report.cost_usd, report.requests) == (2700, 30, 0.0054, 1)
    assert end == ("done", "")  # its failed model-info download is not taken for a failure


def test_an_api_error_aider_retried_past_is_no_failure(tmp_path: Path) -> None:
    report, end = read_back("aider", "retried-then-edited", 0, tmp_path)

    assert (report.input_tokens, report.output_tokens, report.cost_usd) == (1200, 30, None)
    assert end == ("done", "")


@pytest.mark.parametrize(
    ("name", "end"),
    [
        ("empty-reply", ("agent", "Empty response received from LLM. Check your provider account?")),
        ("unauthorized", ("environment", ("litellm.AuthenticationError: AuthenticationError: OpenAIException - "
                                          "Incorrect API key provided."))),
        ("connection-refused",
         ("environment", "litellm.InternalServerError: InternalServerError: OpenAIException - Connection error.")),
    ],
)
def test_aider_exits_0_when_it_stopped_short_and_says_why(name: str, end: tuple[str, str], tmp_path: Path) -> None:
    assert read_back("aider", name, 0, tmp_path)[1] == end


def test_mini_tokens_are_every_calls_usage_in_its_trajectory_and_an_unpriced_cost_is_unknown(tmp_path: Path) -> None:
    report, end = read_back("mini-swe-agent", "submitted", 0, tmp_path)

    assert report == Report(input_tokens=2500, output_tokens=50, cost_usd=None, final_message="Done.",
                            requests=2)  # its model_stats.api_calls
    assert end == ("done", "")


def test_mini_cost_of_a_model_litellm_prices_is_read(tmp_path: Path) -> None:
    report, _ = read_back("mini-swe-agent", "priced", 0, tmp_path)

    assert report.cost_usd == pytest.approx(0.000405)


def test_a_step_limit_end_is_left_to_the_checks_and_names_the_limit(tmp_path: Path) -> None:
    report, end = read_back("mini-swe-agent", "step-limit", 0, tmp_path)

    assert report.final_message == "LimitsExceeded: stopped after 1 model calls (step limit 1, cost limit $3.0)"
    assert (report.input_tokens, report.output_tokens, report.is_error) == (1200, 30, False)
    assert end == ("done", "")


@pytest.mark.parametrize(
    ("name", "sentence"),
    [
        ("unauthorized", ("litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect API key "
                          "provided. You can permanently set your API key with `mini-extra config set KEY VALUE`.")),
        ("connection-refused", "litellm.InternalServerError: InternalServerError: OpenAIException - Connection error."),
        ("wizard", "Aborted."),
    ],
)
def test_mini_that_cannot_reach_or_use_a_model_is_the_environment_in_its_own_words(
    name: str, sentence: str, tmp_path: Path
) -> None:
    # not a line of a traceback's source that names another error
    assert read_back("mini-swe-agent", name, 1, tmp_path)[1] == ("environment", sentence)
