"""Replies that cannot be applied and retries that repeat themselves, end to end.

Real repositories, real pytest runs and the scripted model, answering in the shapes a
small open model writes: the function in a fenced block under a wrong path, a reply cut
off at the output limit, SEARCH lines that are not in the file, the failed code again.
"""

from __future__ import annotations

import json
from pathlib import Path

from projects import (
    CALC,
    CALC_ABS,
    CALC_FIXED,
    do_one_task,
    events_of,
    git,
    make_project,
    reflection_lines,
    tasks_on_disk,
)


def fenced(path: str, code: str) -> str:
    """The shape small models write: a path line, then the code in a fenced block."""
    return f"{path}\n```python\n{code}```\n"


def attempts(repo: Path) -> list[dict]:
    plan = json.loads((repo / ".openagents" / "subtasks" / "T-1.json").read_text())
    return plan["subtasks"][0]["attempts"]


def reflections(repo: Path) -> list[dict]:
    """The attempt reflections (a task's outcome reflection is not one of them)."""
    return reflection_lines(repo)


FIXED_ADD_ONLY = "def add(a, b):\n    return a + b\n"  # the function alone: mul must survive


def test_the_function_alone_under_a_made_up_folder_is_applied_and_committed(git_repo: Path) -> None:
    repo = make_project(git_repo, [{"match": "Task T-1", "reply": fenced("src/calc.py", FIXED_ADD_ONLY)}])

    assert do_one_task(repo) == 0

    assert (repo / "calc.py").read_text() == CALC_FIXED  # add replaced, mul kept
    assert not (repo / "src").exists()
    assert git(repo, "show", "--name-only", "--format=", "HEAD~1").split() == ["calc.py"]
    (attempt,) = attempts(repo)
    assert (attempt["formatAsked"], attempt["formatReceived"], attempt["outcome"]) == ("whole", "whole", "passed")


def test_a_reply_cut_off_gets_a_repair_retry_and_a_reflection_that_says_so(git_repo: Path) -> None:
    cut = "calc.py\n```python\ndef add(a, b):\n    if a == 1 and b == 1:\n        return 2\n    if a == 1 and b == 2:\n"
    repair = (
        r"Attempt 1 could not be applied[\s\S]*cut off at the model's output limit[\s\S]*"
        r"The repository's files are: [^\n]*calc\.py[\s\S]*Reflections from Previous Attempts[\s\S]*short, general solution"
        r"[\s\S]*Reply with the complete new code of calc\.py"
    )
    replies = [
        {"match": repair, "reply": fenced("calc.py", CALC_FIXED)},
        {"match": "Task T-1", "reply": cut, "finish": "length"},
    ]
    repo = make_project(git_repo, replies)

    assert do_one_task(repo) == 0

    first, second = attempts(repo)
    assert first["outcome"] == "edit_failed" and "cut off" in first["summary"]
    assert second["outcome"] == "passed"
    (reflection,) = reflections(repo)
    assert reflection["source"] == "heuristic" and reflection["category"] == "approach_error"
    assert "failureType" not in reflection  # nothing ran: not a test or type-check failure
    assert reflection["attemptNumber"] == 1
    assert len(events_of(repo, "verdict")) == 1  # the cut-off reply was never tested
    (call, _) = events_of(repo, "model_call")
    assert call["finishReason"] == "length"


def test_two_unapplicable_replies_switch_to_whole_files(git_repo: Path) -> None:
    stale = "calc.py\n<<<<<<< SEARCH\n    return a - b  # old\n=======\n    return a + b\n>>>>>>> REPLACE\n"
    replies = [
        {"match": r"Reply with the complete new code of calc\.py", "reply": fenced("calc.py", CALC_FIXED)},
        {"match": "Task T-1", "reply": stale, "times": None},
    ]
    repo = make_project(git_repo, replies, config={"executor": {"editFormat": "search-replace"}})

    assert do_one_task(repo) == 0

    shapes = [(a["formatAsked"], a["formatReceived"], a["outcome"]) for a in attempts(repo)]
    assert shapes == [
        ("search-replace", "search-replace", "edit_failed"),
        ("search-replace", "search-replace", "edit_failed"),
        ("whole", "whole", "passed"),
    ]
    record = json.loads((repo / ".openagents" / "memory" / "edit-formats.json").read_text())
    model = next(iter(record["models"]))
    assert record["models"][model] == {
        "search-replace": {"asked": 2, "applied": 0}, "whole": {"asked": 1, "applied": 1},
    }


def test_a_retry_that_gives_back_the_failed_code_is_asked_again_not_tested_again(git_repo: Path) -> None:
    replies = [
        # The re-ask starts over: the failed code is neither in the files nor quoted.
        {"match": r"^(?![\s\S]*abs\(a\))[\s\S]*Start over\nYour reply gave back exactly the code of attempt 1",
         "reply": fenced("calc.py", CALC_FIXED)},
        {"match": "Task T-1", "reply": fenced("calc.py", CALC_ABS), "times": None},
        {"match": "Failure digest", "reply": "not JSON: the heuristic reflects instead", "times": None},
    ]
    repo = make_project(git_repo, replies)

    assert do_one_task(repo) == 0

    assert [e["action"] for e in events_of(repo, "repeat")] == ["asked again"]
    assert len(events_of(repo, "verdict")) == 2  # attempt 1, and the new code of attempt 2
    asks = [e for e in events_of(repo, "model_call") if e["purpose"] == "execute"]
    assert [e.get("temperature") for e in asks] == [None, None, 0.7]  # the re-ask samples
    assert [a["outcome"] for a in attempts(repo)] == ["failed", "passed"]
    assert (repo / "calc.py").read_text() == CALC_FIXED


def test_a_retry_that_repeats_even_when_asked_again_is_counted_without_a_test_run(git_repo: Path) -> None:
    replies = [{"match": "Task T-1", "reply": fenced("calc.py", CALC_ABS), "times": None}]
    no_early_stop = {"retry": {"stopOnPlateau": False, "stopOnOscillation": False}}
    repo = make_project(git_repo, replies, config=no_early_stop)

    assert do_one_task(repo, "--no-reflexion") == 1

    assert [a["outcome"] for a in attempts(repo)] == ["failed", "repeat", "repeat", "repeat"]
    assert len(events_of(repo, "verdict")) == 1
    assert (repo / "calc.py").read_text() == CALC  # escalated: the tree is back at its start
    reason = tasks_on_disk(repo)["T-1"]["closeReason"]  # the best attempt's failure, and how the retries ended
    assert reason.startswith("1 test(s) this task is about still fail, so it is not done: "
                             "test_calc.py::test_add_negative")
    assert "stopped (max_retries) after 4 attempt(s)" in reason


def test_reasking_repeats_can_be_switched_off(git_repo: Path) -> None:
    replies = [{"match": "Task T-1", "reply": fenced("calc.py", CALC_ABS), "times": None}]
    config = {"retry": {"stopOnPlateau": False, "stopOnOscillation": False, "reaskRepeats": False}}
    repo = make_project(git_repo, replies, config=config)

    assert do_one_task(repo, "--no-reflexion") == 1

    assert [a["outcome"] for a in attempts(repo)] == ["failed"] * 4
    assert len(events_of(repo, "verdict")) == 4 and events_of(repo, "repeat") == []
