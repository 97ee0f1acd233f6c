"""Retries that pay for their tokens: the retry continues the failed attempt's chat, so its
prompt begins with the one before it byte for byte (a prompt cache serves that part), and
with reflexion.oneCall the retry's own reply writes the reflection: one call per retry.

The scripted replies are shaped as a small model writes them: the two labelled lines,
sometimes in bold, then the edit; or the edit alone; or the lines alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from projects import (
    CALC_ABS,
    CALC_FIXED,
    FIX_ADD,
    REFLECTION,
    WRONG_ADD,
    do_one_task,
    events_of,
    make_project,
    model_calls,
    reflection_lines,
)

REPAIR = """calc.py
<<<<<<< SEARCH
    return abs(a) + abs(b)
=======
    return a + b
>>>>>>> REPLACE
"""
REFLECTED = ("What went wrong: add() returned abs(a) + abs(b), so test_add_negative got 2 for add(-1, -1).\n"
             "**What to do differently:** return the plain sum a + b, keeping the sign.\n\n" + REPAIR)
ONE_CALL = {"reflexion": {"oneCall": True}}


def attempts(repo: Path) -> list[dict]:
    plan = json.loads((repo / ".openagents" / "subtasks" / "T-1.json").read_text())
    return plan["subtasks"][0]["attempts"]


def execute_calls(repo: Path) -> list[dict]:
    return [e for e in events_of(repo, "model_call") if e["purpose"] == "execute"]


def test_a_retry_prompt_begins_with_the_prompt_before_it(git_repo: Path) -> None:
    replies = [{"match": "Task T-1", "reply": WRONG_ADD}, {"match": "Failure digest", "reply": REFLECTION},
               {"match": r"Attempt 1 failed[\s\S]*Why it failed", "reply": REPAIR}]
    repo = make_project(git_repo, replies)

    assert do_one_task(repo) == 0

    first, retry = execute_calls(repo)
    assert first["prefixChars"] == 0
    assert retry["prefixChars"] == first["promptChars"]  # all of it: the cache's part
    assert (repo / "calc.py").read_text() == CALC_FIXED
    assert model_calls(repo, "reflect") == 1  # the two-call form: a reflection call of its own


def test_with_one_call_the_retry_reply_writes_the_reflection_and_no_reflection_call_is_made(git_repo: Path) -> None:
    replies = [{"match": "Task T-1", "reply": WRONG_ADD},
               {"match": r"Begin your reply with these two lines", "reply": REFLECTED}]
    repo = make_project(git_repo, replies, config=ONE_CALL)

    assert do_one_task(repo) == 0

    assert model_calls(repo) == 2 and model_calls(repo, "reflect") == 0
    [line] = reflection_lines(repo)
    assert line["source"] == "llm" and line["attemptNumber"] == 1
    assert line["analysis"].startswith("add() returned abs(a) + abs(b)")
    assert line["suggestion"] == "return the plain sum a + b, keeping the sign."
    assert line["category"]  # classified as a separate call's reflection is
    assert [a.get("reflectionId") for a in attempts(repo)] == [line["id"], None]
    [event] = events_of(repo, "reflection")
    assert event["inReply"] is True and event["attempt"] == 1
    assert (repo / "calc.py").read_text() == CALC_FIXED


def test_a_reply_with_only_the_edit_keeps_the_heuristic_reflection_and_applies_the_edit(git_repo: Path) -> None:
    replies = [{"match": "Task T-1", "reply": WRONG_ADD}, {"match": "Attempt 1 failed", "reply": REPAIR}]
    repo = make_project(git_repo, replies, config=ONE_CALL)

    assert do_one_task(repo) == 0

    [line] = reflection_lines(repo)
    assert line["source"] == "heuristic" and line["attemptNumber"] == 1
    assert "test_add_negative" in line["analysis"] + line["suggestion"]
    assert (repo / "calc.py").read_text() == CALC_FIXED and model_calls(repo) == 2


def test_a_reply_with_only_the_reflection_is_asked_for_its_edit_in_the_same_chat(git_repo: Path) -> None:
    only_words = REFLECTED.split("\n\n")[0]  # as the CPU runs' small model wrote twice in 33 retries
    replies = [{"match": "Task T-1", "reply": WRONG_ADD}, {"match": "Attempt 1 failed", "reply": only_words},
               {"match": "now write the edit it calls for", "reply": REPAIR}]
    repo = make_project(git_repo, replies, config=ONE_CALL)

    assert do_one_task(repo) == 0

    assert [a["outcome"] for a in attempts(repo)] == ["failed", "passed"]  # no attempt spent on it
    assert [(r["attemptNumber"], r["source"]) for r in reflection_lines(repo)] == [(1, "llm")]
    assert [e["attempt"] for e in events_of(repo, "code_asked")] == [2]
    _, retry, code = execute_calls(repo)
    assert code["prefixChars"] == retry["promptChars"]  # the same chat: a cache serves all of the retry
    assert (repo / "calc.py").read_text() == CALC_FIXED


def test_a_reflection_then_no_edit_even_when_asked_is_an_unapplied_edit(git_repo: Path) -> None:
    only_words = REFLECTED.split("\n\n")[0]
    replies = [{"match": "Task T-1", "reply": WRONG_ADD}, {"match": "Attempt 1 failed", "reply": only_words},
               {"match": "now write the edit it calls for", "reply": "I have explained what to change above."},
               {"match": "Attempt 2 could not be applied", "reply": REPAIR}]
    repo = make_project(git_repo, replies, config=ONE_CALL)

    assert do_one_task(repo) == 0

    assert [a["outcome"] for a in attempts(repo)] == ["failed", "edit_failed", "passed"]
    lines = reflection_lines(repo)
    assert [(r["attemptNumber"], r["source"]) for r in lines] == [(1, "llm"), (2, "heuristic")]
    assert (repo / "calc.py").read_text() == CALC_FIXED


def test_the_last_failure_before_an_escalation_still_gets_its_reflection(git_repo: Path) -> None:
    replies = [{"match": "Task T-1", "reply": WRONG_ADD, "times": None}]
    repo = make_project(git_repo, replies, config={**ONE_CALL, "reflexion": {"oneCall": True, "maxRetries": 1},
                                                   "retry": {"reaskRepeats": False}})

    assert do_one_task(repo) == 1

    # No reply follows attempt 2, and a call of its own would cost as much as a retry: the heuristic
    # one. The task's outcome reflection is the one reflection call.
    assert [(r["attemptNumber"], r["source"]) for r in reflection_lines(repo)][-1] == (2, "heuristic")
    assert all(a.get("reflectionId") for a in attempts(repo))
    assert [c["purpose"] for c in events_of(repo, "model_call")].count("reflect") == 1
    packet = (repo / ".openagents" / "escalations" / "T-1.md").read_text()
    assert packet.count("test_add_negative") >= 1


def test_cached_tokens_a_provider_reports_are_shown_and_priced_lower(git_repo: Path, capsys) -> None:
    replies = [{"match": "Task T-1", "reply": WRONG_ADD}, {"match": "Attempt 1 failed", "reply": REFLECTED}]
    pricing = {"inputCostPerToken": 1e-6, "outputCostPerToken": 2e-6, "cachedInputCostPerToken": 1e-7}
    repo = make_project(git_repo, replies, config=ONE_CALL, script_extra={"pricing": pricing, "promptCache": True})

    assert do_one_task(repo) == 0

    first, retry = execute_calls(repo)
    assert first["cachedTokens"] == 0 and retry["cachedTokens"] > 0
    full = retry["inputTokens"] * 1e-6 + retry["outputTokens"] * 2e-6
    assert retry["costUsd"] < full  # the cached part at a tenth
    assert f"({first['cachedTokens'] + retry['cachedTokens']} cached)" in capsys.readouterr().out


def test_a_provider_that_reports_no_cache_is_priced_in_full_and_says_so(git_repo: Path, capsys) -> None:
    replies = [{"match": "Task T-1", "reply": WRONG_ADD}, {"match": "Attempt 1 failed", "reply": REFLECTED}]
    repo = make_project(git_repo, replies, config=ONE_CALL)

    assert do_one_task(repo) == 0

    assert all(call.get("cachedTokens") is None for call in execute_calls(repo))
    assert "tokens in (cache not reported)" in capsys.readouterr().out


ZERO_ADD = WRONG_ADD.replace("abs(a) + abs(b)", "0")  # test_add and test_add_negative both still fail
ADAPTIVE = {"retry": {"strategy": "adaptive"}}


def test_adaptive_starts_afresh_after_a_draft_far_off_and_records_what_it_came_to(git_repo: Path) -> None:
    # Both replies answer the first prompt; FIX_ADD's search text, `return a - b`, is only in the
    # base's file, so it applies only to a fresh start.
    replies = [{"match": "Task T-1", "reply": ZERO_ADD}, {"match": "Task T-1", "reply": FIX_ADD}]
    repo = make_project(git_repo, replies, config={**ADAPTIVE, **ONE_CALL, "modelTemperature": 0})

    assert do_one_task(repo) == 0

    [choice] = events_of(repo, "retry_choice")
    assert (choice["failureClass"], choice["choice"]) == ("far_off", "resample")
    # Its only reflection is the heuristic one, which restates the failure: the fresh start is
    # the first prompt again, byte for byte (a cache serves all of it), sampled.
    first, fresh = execute_calls(repo)
    assert fresh["prefixChars"] == fresh["promptChars"] == first["promptChars"]
    assert [first.get("temperature"), fresh.get("temperature")] == [None, 0.8]
    [kept] = reflection_lines(repo)
    assert kept["source"] == "heuristic" and kept["attemptNumber"] == 1  # still kept for memory and the packet
    assert (repo / "calc.py").read_text() == CALC_FIXED
    record = json.loads((repo / ".openagents" / "memory" / "retry-choices.json").read_text())
    assert record["classes"]["far_off"]["resample"] == {"tried": 1, "passed": 1}


def test_adaptive_repairs_a_near_miss_in_the_same_chat(git_repo: Path) -> None:
    replies = [{"match": "Task T-1", "reply": WRONG_ADD}, {"match": "Attempt 1 failed", "reply": REFLECTED}]
    repo = make_project(git_repo, replies, config={**ADAPTIVE, **ONE_CALL})

    assert do_one_task(repo) == 0

    [choice] = events_of(repo, "retry_choice")
    assert (choice["failureClass"], choice["choice"]) == ("near_miss", "repair")
    first, retry = execute_calls(repo)
    assert retry["prefixChars"] == first["promptChars"]


CRASH_ADD = WRONG_ADD.replace("abs(a) + abs(b)", "a.total")  # AttributeError: no attribute 'total'
CRASH_AGAIN = ("What went wrong: add() read a.total, and an int has no total.\n"
               "What to do differently: read the total another way.\n\n"
               "calc.py\n<<<<<<< SEARCH\n    return a.total\n=======\n    return (a).total + 0\n>>>>>>> REPLACE\n")


def test_adaptive_starts_afresh_when_a_repair_failed_exactly_as_the_attempt_it_repaired(git_repo: Path) -> None:
    # FIX_ADD's search text, `return a - b`, is only in the base's file: applied, it shows a fresh start.
    # The fresh start is told the lesson attempt 2's reply wrote, not attempt 2's heuristic one.
    told = r"^(?![\s\S]*### Attempt 2)[\s\S]*### Attempt 1\n- \*\*What went wrong\*\*: add\(\) read a.total"
    replies = [{"match": "Task T-1", "reply": CRASH_ADD}, {"match": "Attempt 1 failed", "reply": CRASH_AGAIN},
               {"match": told, "reply": FIX_ADD}]
    repo = make_project(git_repo, replies, config={**ADAPTIVE, **ONE_CALL})

    assert do_one_task(repo) == 0

    first, second = events_of(repo, "retry_choice")
    assert (first["failureClass"], first["choice"]) == ("crash", "repair")  # a traceback names the line
    assert (second["failureClass"], second["choice"]) == ("crash", "resample")
    assert second["why"] == "attempt 2 repaired attempt 1 and failed exactly as it did"
    assert (repo / "calc.py").read_text() == CALC_FIXED


def test_adaptive_counts_a_repair_that_gives_the_code_back_and_samples_its_fresh_start(git_repo: Path) -> None:
    # A greedy model's repair gives attempt 1's code back: one call per attempt, so it is counted
    # (no second ask inside the attempt), and the next attempt starts over as a sample.
    repeat = REFLECTED.replace(REPAIR, f"calc.py\n```python\n{CALC_ABS}```\n")  # attempt 1's file, whole
    replies = [{"match": "Task T-1", "reply": WRONG_ADD}, {"match": "Attempt 1 failed", "reply": repeat},
               {"match": "Reflections from Previous Attempts", "reply": FIX_ADD}]
    repo = make_project(git_repo, replies, config={**ADAPTIVE, **ONE_CALL, "modelTemperature": 0})

    assert do_one_task(repo) == 0

    [repeat_event] = events_of(repo, "repeat")
    assert repeat_event["action"] == "counted as a failed attempt"
    assert [a["outcome"] for a in attempts(repo)] == ["failed", "repeat", "passed"]
    assert [c.get("temperature") for c in execute_calls(repo)] == [None, None, 0.8]
    assert (repo / "calc.py").read_text() == CALC_FIXED


def test_the_project_record_overrules_the_rule_once_both_choices_were_tried(git_repo: Path) -> None:
    record = {"classes": {"far_off": {"repair": {"tried": 4, "passed": 3}, "resample": {"tried": 4, "passed": 0}}}}
    memory = git_repo / ".openagents" / "memory"
    memory.mkdir(parents=True)
    (memory / "retry-choices.json").write_text(json.dumps(record))
    repair_zero = REPAIR.replace("abs(a) + abs(b)", "0")
    replies = [{"match": "Task T-1", "reply": ZERO_ADD}, {"match": "Attempt 1 failed", "reply": repair_zero}]
    repo = make_project(git_repo, replies, config={**ADAPTIVE, **ONE_CALL})

    assert do_one_task(repo) == 0

    [choice] = events_of(repo, "retry_choice")
    assert choice["choice"] == "repair" and "this project's record" in choice["why"]


def test_adaptive_and_fresh_together_are_refused_with_one_sentence() -> None:
    from orchestrator.config import ConfigError, check_config

    with pytest.raises(ConfigError, match='"adaptive" and retry.fresh cannot both be set'):
        check_config({"modelTemperature": 0.8, "retry": {"strategy": "adaptive", "fresh": True}})


def test_a_reply_with_neither_keeps_the_heuristic_reflection_and_the_loop_goes_on(git_repo: Path) -> None:
    replies = [{"match": "Task T-1", "reply": WRONG_ADD},
               {"match": "Attempt 1 failed", "reply": "I am not sure what else to try here."},
               {"match": "Attempt 2 could not be applied", "reply": REPAIR}]
    repo = make_project(git_repo, replies, config=ONE_CALL)

    assert do_one_task(repo) == 0

    assert [a["outcome"] for a in attempts(repo)] == ["failed", "edit_failed", "passed"]
    assert [(r["attemptNumber"], r["source"]) for r in reflection_lines(repo)] == [(1, "heuristic"), (2, "heuristic")]
