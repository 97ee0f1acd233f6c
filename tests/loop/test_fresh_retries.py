"""`retry.fresh`: each retry an independent sample from the subtask's base tree, told
nothing of the failed attempts; the first that passes the checks is kept (best of N).

The scripted model answers the second ask only when its prompt carries nothing of the
first attempt, and its SEARCH text is only in the base tree: a retry that started from
the failed tree, or was told about it, gets no reply and the test fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from projects import (
    CALC_ABS,
    CALC_FIXED,
    FIX_ADD,
    WRONG_ADD,
    do_one_task,
    events_of,
    make_project,
    model_calls,
    reflection_lines,
)

from orchestrator.config import ConfigError, check_config

FRESH = {"modelTemperature": 0.8, "retry": {"fresh": True, "stopOnPlateau": False, "stopOnOscillation": False}}
TOLD_NOTHING = r"^(?![\s\S]*(Attempt 1|abs\(|Reflections|Start over))[\s\S]*# Task T-1"


def attempts(repo: Path) -> list[dict]:
    plan = json.loads((repo / ".openagents" / "subtasks" / "T-1.json").read_text())
    return plan["subtasks"][0]["attempts"]


def test_a_fresh_retry_starts_from_the_base_tree_and_is_told_nothing(git_repo: Path) -> None:
    replies = [
        {"match": "# Task T-1", "reply": WRONG_ADD},
        {"match": TOLD_NOTHING, "reply": FIX_ADD},  # "return a - b" is only in the base tree
    ]
    repo = make_project(git_repo, replies, config=FRESH)

    assert do_one_task(repo) == 0

    assert [a["outcome"] for a in attempts(repo)] == ["failed", "passed"]
    assert (repo / "calc.py").read_text() == CALC_FIXED
    assert model_calls(repo, "reflect") == 0 and reflection_lines(repo) == []
    assert [e["attempt"] for e in events_of(repo, "fresh_retry")] == [1]
    first, second = (e["promptChars"] for e in events_of(repo, "model_call"))
    assert second == first  # the first attempt's prompt, again


def test_fresh_retries_that_give_back_the_same_code_are_tested_again_not_asked_again(git_repo: Path) -> None:
    fenced_abs = f"calc.py\n```python\n{CALC_ABS}```\n"
    repo = make_project(git_repo, [{"match": TOLD_NOTHING, "reply": fenced_abs, "times": None}], config=FRESH)

    assert do_one_task(repo) == 1

    assert [a["outcome"] for a in attempts(repo)] == ["failed"] * 4
    assert events_of(repo, "repeat") == [] and len(events_of(repo, "verdict")) == 4
    assert model_calls(repo) == 4  # one sample per attempt: no re-ask, no reflection


def test_fresh_retries_at_temperature_zero_are_refused_with_one_sentence() -> None:
    with pytest.raises(ConfigError, match="retry.fresh draws every retry anew.*modelTemperature above 0"):
        check_config({"modelTemperature": 0, "retry": {"fresh": True}})
    assert check_config({"retry": {"fresh": True}}).retry.fresh  # the provider's default may sample


def test_fresh_samples_are_not_stopped_as_a_plateau_and_are_called_samples_not_reflections(
    git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fenced_abs = f"calc.py\n```python\n{CALC_ABS}```\n"
    config = {"modelTemperature": 0.8, "retry": {"fresh": True}}  # the convergence stops left on
    repo = make_project(git_repo, [{"match": TOLD_NOTHING, "reply": fenced_abs, "times": None}], config=config)

    assert do_one_task(repo) == 1

    assert [a["outcome"] for a in attempts(repo)] == ["failed"] * 4  # each sample independent: all 4 drawn
    out = capsys.readouterr().out
    assert "fresh sample 2 of 4" in out and "fresh sample 4 of 4" in out
    assert "unlikely" not in out and "reflection did not help" not in out
    assert "retries were fresh samples (retry.fresh): no reflections" in out
    packet = (repo / ".openagents" / "escalations" / "T-1.md").read_text()
    assert "retries were fresh samples (retry.fresh): no reflections" in packet
    assert "reflexion was off" not in packet


def test_the_tree_strategy_with_fresh_retries_stops_do_one_task_with_one_sentence(
    git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = make_project(git_repo, [], config={"retry": {"strategy": "tree", "fresh": True}})

    assert do_one_task(repo) == 2

    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and err.count("\n") == 1
    assert 'retry.strategy "tree" and retry.fresh cannot both be set' in err


def test_fresh_retries_at_temperature_zero_are_accepted_for_an_agent_command() -> None:
    agent = {"kind": "command", "command": "my-agent --prompt {prompt_file}"}
    config = check_config({"modelTemperature": 0, "retry": {"fresh": True}, "executor": agent})
    assert config.retry.fresh  # the agent samples at its own temperature
    with pytest.raises(ConfigError, match="modelTemperature above 0"):
        check_config({"modelTemperature": 0, "retry": {"fresh": True}, "executor": {"kind": "builtin"}})
