"""Outcome reflections written by the reflection model (seed 001), the heuristic's as the
fallback; MARS only where the model finds a systemic cause or a replicable strategy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from projects import REFLECTION, WRONG_ADD, do_one_task, events_of, make_project, outcome_lines, task

from reflection.outcome_model import MARKER, fields_from_reply

FIX_ABS = "calc.py\n<<<<<<< SEARCH\n    return abs(a) + abs(b)\n=======\n    return a + b\n>>>>>>> REPLACE\n"
ZERO_ABS = "calc.py\n<<<<<<< SEARCH\n    return abs(a) + abs(b)\n=======\n    return 0\n>>>>>>> REPLACE\n"
SECRET = "sk-live-4eC39HqLyjWDarjtT1zdp7dc"

SUCCESS = {"strategy": "Return a + b without abs() so that negative operands keep their sign.",
           "whyItWorked": "The first attempt wrapped the operands in abs(); the failing test used negatives.",
           "replicable": True, "principle": "Keep the sign of operands in arithmetic helpers.",
           "procedure": ["Read the failing assertion of test_add_negative.", "Remove abs() from add in calc.py.",
                         "Run the tests again."]}
FAILED = {"whatHappened": "Task T-1 was blocked after 2 attempts.",
          "whatWentWrong": "Attempt 2 returned 0 from add in calc.py; test_add failed.",
          "whyItWentWrong": "The retries guessed at the result instead of reading the test's expectation.",
          "whatToDoDifferently": "Read test_add's expected value before editing add.",
          "tacticalRule": "Always read the failing assertion before changing code.",
          "systemic": False, "principle": "I should follow this rule: guess less.", "procedure": ["Guess less."]}


def fail_then_pass(git_repo: Path, outcome_reply: str, **description: str) -> Path:
    replies = [
        {"match": MARKER, "reply": outcome_reply},
        {"match": "Task T-1", "reply": WRONG_ADD},
        {"match": "Failure digest", "reply": REFLECTION},
        {"match": "Task T-1", "reply": FIX_ABS},
    ]
    return make_project(git_repo, replies, tasks=[task("T-1", "Fix add", **description)],
                        config={"retry": {"preflight": False}})


def test_a_success_procedure_is_written_by_the_model_from_a_fenced_reply(git_repo: Path) -> None:
    reply = "Here is the reflection:\n```json\n" + json.dumps(SUCCESS) + "\n```\nHope it helps."
    repo = fail_then_pass(git_repo, reply)

    assert do_one_task(repo) == 0

    (success,) = outcome_lines(repo)
    assert success["outcome"] == "success" and success["source"] == "llm"
    assert success["model"].startswith("scripted/") and success["model"].endswith(".openagents/script.json")
    assert success["strategy"] == SUCCESS["strategy"] and success["whyItWorked"] == SUCCESS["whyItWorked"]
    assert success["principle"] == "I should follow this rule: Keep the sign of operands in arithmetic helpers."
    assert success["procedure"] == SUCCESS["procedure"]
    assert events_of(repo, "outcome_reflected")[0]["source"] == "llm"


def test_a_strategy_the_model_finds_not_replicable_carries_no_mars_pair(git_repo: Path) -> None:
    repo = fail_then_pass(git_repo, json.dumps({**SUCCESS, "replicable": False}))

    assert do_one_task(repo) == 0

    (success,) = outcome_lines(repo)
    assert success["source"] == "llm" and "principle" not in success and "procedure" not in success


@pytest.mark.parametrize("reply", ["I could not work out what happened.", '{"strategy": "half of it"}',
                                   "```json\n{\"strategy\": \"broken\",\n```"])
def test_a_reply_without_the_fields_keeps_the_heuristic_record(git_repo: Path, reply: str) -> None:
    repo = fail_then_pass(git_repo, reply)

    assert do_one_task(repo) == 0

    (success,) = outcome_lines(repo)
    assert success["source"] == "heuristic" and "model" not in success
    assert "the change: - return a - b / + return a + b" in success["strategy"]  # the heuristic's words


def test_a_failed_task_gets_all_five_fields_and_no_mars_without_a_systemic_cause(git_repo: Path) -> None:
    replies = [{"match": MARKER, "reply": "Sure.\n" + json.dumps(FAILED)},
               {"match": "Task T-1", "reply": WRONG_ADD}, {"match": "Failure digest", "reply": REFLECTION},
               {"match": "Task T-1", "reply": ZERO_ABS}]
    repo = make_project(git_repo, replies, config={"reflexion": {"maxRetries": 1},
                                                   "retry": {"preflight": False, "reaskRepeats": False}})

    assert do_one_task(repo) == 1

    failed = next(line for line in outcome_lines(repo) if line["outcome"] == "failed")
    assert failed["source"] == "llm"
    assert {key: failed[key] for key in FAILED if key in failed} == {
        key: value for key, value in FAILED.items() if key not in ("systemic", "principle", "procedure")}
    assert "principle" not in failed and "procedure" not in failed


def test_no_secret_of_the_task_reaches_the_model(git_repo: Path) -> None:
    leaked = {**SUCCESS, "strategy": "LEAKED"}
    replies = [{"match": SECRET, "reply": json.dumps(leaked), "times": None},
               {"match": MARKER, "reply": json.dumps(SUCCESS)},
               {"match": "Task T-1", "reply": WRONG_ADD}, {"match": "Failure digest", "reply": REFLECTION},
               {"match": "Task T-1", "reply": FIX_ABS}]
    description = f"add() in calc.py is wrong; the payment key is {SECRET}, do not print it."
    repo = make_project(git_repo, replies, tasks=[task("T-1", "Fix add", description=description)],
                        config={"retry": {"preflight": False}})

    assert do_one_task(repo) == 0

    (success,) = outcome_lines(repo)
    assert success["source"] == "llm" and success["strategy"] == SUCCESS["strategy"]
    assert SECRET not in json.dumps(outcome_lines(repo))


def test_with_reflexion_off_the_model_writes_nothing(git_repo: Path) -> None:
    repo = fail_then_pass(git_repo, json.dumps(SUCCESS))
    config = repo / ".openagents" / "project.json"
    config.write_text(config.read_text().replace('"maxRetries": 3', '"maxRetries": 3, "useLLM": false'))

    assert do_one_task(repo) == 0

    (success,) = outcome_lines(repo)
    assert success["source"] == "heuristic"


def test_the_reply_is_read_in_either_spelling_and_a_half_pair_is_no_mars() -> None:
    fields = fields_from_reply({"strategy": "s", "why_it_worked": "w", "replicable": "yes",
                                "principle": "I should follow this rule: one", "procedure": "a lone step"},
                               "success")
    assert fields["why_it_worked"] == "w" and fields["principle"] == "I should follow this rule: one"
    assert fields["procedure"] == ["a lone step"]
    half = fields_from_reply({"strategy": "s", "whyItWorked": "w", "replicable": True, "principle": "p"}, "success")
    assert half["principle"] is None and half["procedure"] is None
    with pytest.raises(ValueError, match="tacticalRule"):
        fields_from_reply({key: "x" for key in FAILED if key != "tacticalRule"}, "failed")
