"""Outcome reflections written from a task's story: which record, and what it says."""

from __future__ import annotations

import orjson

from reflection.outcome import (
    PRINCIPLE_PREFIX,
    AttemptStory,
    OutcomeReflection,
    TaskStory,
    decision_reflection,
    is_outcome,
    outcome_reflections,
)
from reflection.schema import FailureCategory, Reflection


def reflection(attempt: int, **extra: object) -> Reflection:
    fields: dict[str, object] = {
        "category": FailureCategory.EDGE_CASE,
        "analysis": "parse() indexes the first token without checking the input is empty.",
        "suggestion": "Return an empty list when the input has no tokens.",
        "action_items": ["guard empty input before indexing"],
        "confidence": 0.7,
    } | extra
    return Reflection(session_id="s1", task_id="T-1", subtask_id="T-1.1", attempt_number=attempt, **fields)


def attempt(number: int, passed: bool = False, kind: str | None = "test_failure", **extra: object) -> AttemptStory:
    fields: dict[str, object] = {
        "summary": "test_parse_empty failed: IndexError: list index out of range",
        "error_signature": f"sig-{number}",
        "files": ("src/parser.py",),
        "reflection": None,
    } | extra
    return AttemptStory(number=number, passed=passed, failure_kind=None if passed else kind, **fields)


def story(*attempts: AttemptStory, **extra: object) -> TaskStory:
    fields: dict[str, object] = {
        "session_id": "s1",
        "task_id": "T-1",
        "title": "Parse empty input without crashing",
        "description": "parse('') should return [].",
        "task_type": "bugfix",
        "labels": ("parser",),
        "agent": "coder",
        "ended": "blocked",
        "stop_reason": "max_retries",
        "reason": "4 attempts failed",
        "subtasks_total": 1,
        "subtasks_done": 0,
        "attempts": attempts,
    } | extra
    return TaskStory(**fields)  # type: ignore[arg-type]


def test_an_escalated_task_names_the_last_attempts_failure_though_it_had_no_reflection() -> None:
    last = attempt(3, kind="timeout", summary="the tests ran past 120 s and were killed")
    escalated = story(attempt(1, reflection=reflection(1)), attempt(2, reflection=reflection(2)), last)

    (record,) = outcome_reflections(escalated)

    assert record.outcome == "failed" and record.kind == "outcome" and record.source == "heuristic"
    assert "Attempt 3" in record.what_went_wrong and "120 s" in record.what_went_wrong
    assert record.why_it_went_wrong.startswith("parse() indexes")  # the latest reflection's analysis
    assert record.what_to_do_differently == "Return an empty list when the input has no tokens."
    assert record.tactical_rule == "Guard empty input before indexing."
    assert record.error_signature == "sig-3"
    assert record.files == ["src/parser.py"] and record.labels == ["parser"] and record.task_type == "bugfix"
    assert record.principle == PRINCIPLE_PREFIX + "Guard empty input before indexing."  # timeout: systemic
    assert record.procedure and record.procedure[-1].startswith("Run the typecheck")


def test_without_any_reflection_the_why_is_chosen_by_failure_kind() -> None:
    (record,) = outcome_reflections(story(attempt(1, kind="edit", summary="no such file: src/parse.py")))

    assert "did not match the files" in record.why_it_went_wrong
    assert "exactly" in record.tactical_rule
    assert record.rule() == record.tactical_rule
    assert record.principle is not None  # an unapplied edit is a systemic cause


def test_repeated_signatures_are_named_and_make_the_failure_systemic() -> None:
    same = [attempt(n, error_signature="abc123") for n in (1, 2, 3)]
    (record,) = outcome_reflections(story(*same))

    assert "same error (abc123) came back in attempts 1, 2, 3" in record.what_went_wrong
    assert "repeated one approach" in record.why_it_went_wrong
    assert record.principle and record.procedure


def test_a_one_off_code_bug_gets_no_mars_pair() -> None:
    (record,) = outcome_reflections(story(attempt(1)))
    assert record.principle is None and record.procedure is None
    assert "principle" not in record.to_dict() and "strategy" not in record.to_dict()


def test_fail_then_pass_leaves_a_success_procedure_with_steps() -> None:
    fixed = story(
        attempt(1, reflection=reflection(1)),
        attempt(2, passed=True, summary="guarded the empty case in parse()"),
        ended="closed",
        reason="all checks passed",
    )

    (record,) = outcome_reflections(fixed)

    assert record.outcome == "success"
    assert "Attempt 2" in record.strategy and "Return an empty list" in record.strategy
    assert "attempt 1" in record.why_it_worked and "IndexError" in record.why_it_worked
    assert record.procedure[0].startswith("Read the failure")
    assert "Guard empty input before indexing." in record.procedure
    assert record.procedure[-1].endswith("they passed at attempt 2.")
    assert record.principle.startswith(PRINCIPLE_PREFIX)
    assert record.lesson_text() == record.strategy
    assert outcome_reflections(fixed, success_procedures="never") == []


def test_a_first_try_pass_leaves_nothing_unless_asked() -> None:
    easy = story(attempt(1, passed=True, summary="added the guard"), ended="closed")

    assert outcome_reflections(easy) == []
    (record,) = outcome_reflections(easy, success_procedures="always")
    assert record.outcome == "success" and record.strategy == "added the guard"
    assert record.procedure is None and record.principle is None


def test_blocked_after_a_committed_subtask_is_partial() -> None:
    half = story(attempt(1, passed=True), attempt(2), subtasks_total=2, subtasks_done=1)

    (record,) = outcome_reflections(half)

    assert record.outcome == "partial"
    assert "1 of 2 subtasks were committed" in record.what_happened
    assert "Attempt 2" in record.what_went_wrong
    assert record.what_to_do_differently
    assert record.why_it_went_wrong is None and record.tactical_rule is None
    assert record.lesson_text() == record.what_to_do_differently


def test_closed_with_waived_tests_is_partial() -> None:
    waived = story(attempt(1, passed=True), ended="closed", waived=("tests/test_io.py::test_slow",))

    (record,) = outcome_reflections(waived)

    assert record.outcome == "partial"
    assert "tests/test_io.py::test_slow" in record.what_went_wrong


def test_a_waived_pass_after_a_failure_also_keeps_what_finally_worked() -> None:
    waived = story(attempt(1), attempt(2, passed=True, kind=None), ended="closed",
                   waived=("tests/test_io.py::test_slow",))

    partial, success = outcome_reflections(waived)

    assert (partial.outcome, success.outcome) == ("partial", "success")
    assert success.procedure


def test_secrets_in_a_failure_never_reach_the_record() -> None:
    key = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
    leaky = attempt(1, summary=f"login failed with api key {key} and password=Hunter2Secret!x")
    (record,) = outcome_reflections(story(leaky, title=f"Use key {key}"))

    line = record.to_json_line().decode()
    assert key not in line and "Hunter2Secret" not in line
    assert "[REDACTED:" in record.what_went_wrong


def test_texts_are_one_line_and_bounded() -> None:
    long = attempt(1, summary="boom\n" * 400, files=tuple(f"src/m{i}.py" for i in range(3)))
    (record,) = outcome_reflections(story(long))

    for text in (record.what_happened, record.what_went_wrong, record.why_it_went_wrong):
        assert "\n" not in text and len(text) <= 500
    assert record.files == ["src/m0.py", "src/m1.py", "src/m2.py"]


def test_a_record_round_trips_through_its_json_line_and_keeps_unknown_keys() -> None:
    (record,) = outcome_reflections(story(attempt(1)))
    body = orjson.loads(record.to_json_line()) | {"reviewer": "ana"}

    read = OutcomeReflection.from_json_line(orjson.dumps(body))

    assert list(orjson.loads(record.to_json_line()))[:3] == ["id", "kind", "outcome"]
    assert body["createdAt"].endswith("Z")
    assert read.model_extra == {"reviewer": "ana"}
    assert orjson.loads(read.to_json_line()) == body
    assert OutcomeReflection.from_json_line(record.to_json_line()) == record
    assert is_outcome(body) and not is_outcome(orjson.loads(reflection(1).to_json_line()))


def test_a_decision_record() -> None:
    record = decision_reflection(
        session_id="s1",
        task_id="T-2",
        agent="planner",
        title="Split the migration",
        decision="Split the task into schema and data subtasks",
        alternatives=["one subtask", "three subtasks"],
        why="the data step needs the schema committed first",
    )

    assert record.outcome == "decision" and record.alternatives == ["one subtask", "three subtasks"]
    assert record.lesson_text() == (
        "Split the task into schema and data subtasks. Why: The data step needs the schema committed first."
    )
    assert record.rule() is None
