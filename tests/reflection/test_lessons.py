"""What a stored record teaches, and how a lesson is scored against an attempt."""

from __future__ import annotations

from reflection.lessons import Lesson, LessonQuery, best_lessons, score_lesson, usefulness


def attempt_record(**overrides: object) -> dict[str, object]:
    record: dict[str, object] = {
        "id": "r1",
        "sessionId": "s1",
        "taskId": "T-1",
        "subtaskId": "T-1.1",
        "attemptNumber": 1,
        "category": "root_cause",
        "analysis": "The parser dropped the timezone.",
        "suggestion": "Parse with fromisoformat and keep tzinfo.",
        "actionItems": ["keep tzinfo"],
        "confidence": 0.7,
        "createdAt": "2025-03-01T10:00:00Z",
        "errorSignature": "AssertionError@tests/test_dates.py::test_tz",
        "filesModified": ["src/dates.py"],
    }
    return record | overrides


def outcome_record(outcome: str, **fields: object) -> dict[str, object]:
    base: dict[str, object] = {
        "id": f"o-{outcome}",
        "kind": "outcome",
        "outcome": outcome,
        "sessionId": "s1",
        "taskId": "T-2",
        "agent": "coder",
        "title": "login flow",
        "createdAt": "2025-03-02T10:00:00Z",
        "labels": ["auth"],
        "files": ["src/login.py"],
        "source": "agent",
    }
    return base | fields


def make_lesson(lesson_id: str, text: str, **fields: object) -> Lesson:
    values: dict[str, object] = {
        "id": lesson_id,
        "task_id": "T-9",
        "kind": "attempt",
        "text": text,
        "rule": None,
        "task_type": None,
        "labels": (),
        "files": (),
        "error_signature": None,
        "created_at": "2025-03-01T10:00:00Z",
        "agent": None,
    }
    return Lesson(**(values | fields))  # type: ignore[arg-type]


def test_an_attempt_reflection_teaches_its_analysis_and_suggestion() -> None:
    lesson = Lesson.from_record(attempt_record())
    assert lesson is not None
    assert lesson.kind == "attempt"
    assert lesson.text == "The parser dropped the timezone. -> Parse with fromisoformat and keep tzinfo."
    assert lesson.files == ("src/dates.py",)
    assert lesson.error_signature == "AssertionError@tests/test_dates.py::test_tz"


def test_a_long_attempt_text_is_clipped() -> None:
    lesson = Lesson.from_record(attempt_record(analysis="word " * 400))
    assert lesson is not None and len(lesson.text) <= 600 and lesson.text.endswith("…")


def test_each_outcome_teaches_from_its_own_fields() -> None:
    failed = Lesson.from_record(
        outcome_record("failed", whatToDoDifferently="Refresh the token.", tacticalRule="Check expiry first.")
    )
    partial = Lesson.from_record(outcome_record("partial", whatToDoDifferently="Split the migration."))
    success = Lesson.from_record(outcome_record("success", strategy="Bisect the commits", whyItWorked="fast to see"))
    decision = Lesson.from_record(outcome_record("decision", decision="Use SQLite", whyChosen="no server to run"))
    assert failed is not None
    assert (failed.kind, failed.text, failed.rule) == ("failed", "Refresh the token.", "Check expiry first.")
    assert partial is not None and partial.text == "Split the migration."
    assert success is not None and "Bisect the commits" in success.text and "fast to see" in success.text
    assert decision is not None and "Use SQLite" in decision.text and "no server to run" in decision.text
    assert failed.labels == ("auth",) and failed.agent == "coder"


def test_a_principle_becomes_the_rule_without_its_preamble() -> None:
    lesson = Lesson.from_record(
        outcome_record("failed", whatToDoDifferently="x", principle="I should follow this rule: run migrations first.")
    )
    assert lesson is not None and lesson.rule == "run migrations first."


def test_records_with_nothing_to_teach_or_of_other_shapes_give_no_lesson() -> None:
    assert Lesson.from_record(attempt_record(analysis="", suggestion="")) is None
    assert Lesson.from_record(outcome_record("partial")) is None
    assert Lesson.from_record(outcome_record("exploded", whatToDoDifferently="x")) is None
    assert Lesson.from_record({"kind": "note", "id": "n", "taskId": "T"}) is None
    assert Lesson.from_record(["not", "a", "record"]) is None
    assert Lesson.from_record(attempt_record(id=None)) is None


def test_unknown_keys_and_wrong_types_are_tolerated() -> None:
    lesson = Lesson.from_record(attempt_record(futureKey={"a": 1}, filesModified="not-a-list", errorSignature=3))
    assert lesson is not None and lesson.files == () and lesson.error_signature is None


def test_a_lesson_survives_its_json_round_trip() -> None:
    lesson = Lesson.from_record(outcome_record("failed", whatToDoDifferently="Refresh the token.", taskType="bugfix"))
    assert lesson is not None and Lesson.from_json(lesson.to_json()) == lesson


def test_a_lesson_with_no_relevance_is_never_returned() -> None:
    lesson = make_lesson("a", "something else", files=("src/other.py",))
    assert score_lesson(lesson, LessonQuery("dates", files=("src/dates.py",)), 0.0) is None


def test_the_asking_tasks_own_lessons_are_excluded() -> None:
    lesson = make_lesson("a", "dates", task_id="T-1")
    assert score_lesson(lesson, LessonQuery("dates", exclude_task_id="T-1"), 1.0) is None


def test_a_same_path_counts_more_than_a_same_file_name() -> None:
    query = LessonQuery("", files=("src/dates.py",))
    same_path = score_lesson(make_lesson("a", "x", files=("src/dates.py",)), query, 0.0)
    same_name = score_lesson(make_lesson("b", "y", files=("lib/dates.py",)), query, 0.0)
    assert same_path is not None and same_name is not None and same_path.score > same_name.score


def test_why_names_every_component() -> None:
    lesson = make_lesson("a", "dates", task_type="bugfix", labels=("Auth",), error_signature="E1")
    query = LessonQuery("dates", task_type="BugFix", labels=("auth",), error_signatures=("E1",))
    ranked = score_lesson(lesson, query, 0.5, shown=2, helped=1)
    assert ranked is not None
    components = {"text", "task_type", "labels", "tools", "files", "signature", "shared_words", "shown", "helped",
                  "usefulness", "age_days"}
    assert components <= set(ranked.why)
    assert (ranked.why["task_type"], ranked.why["labels"], ranked.why["signature"]) == (1.0, 1.0, 1.0)
    assert ranked.why["usefulness"] == round(usefulness(2, 1), 4)


def test_lessons_that_never_help_fade_and_unproven_ones_are_neutral() -> None:
    assert usefulness(0, 0) == 1.0
    assert usefulness(5, 0) < usefulness(1, 0) < 1.0
    assert usefulness(5, 5) > 1.0


def test_recency_breaks_ties_and_identical_texts_are_returned_once() -> None:
    query = LessonQuery("tzinfo")
    old = score_lesson(make_lesson("old", "Keep tzinfo.", created_at="2024-01-01T00:00:00Z"), query, 1.0)
    new = score_lesson(make_lesson("new", "keep  TZINFO", created_at="2025-01-01T00:00:00Z"), query, 1.0)
    other = score_lesson(make_lesson("other", "Other tzinfo advice", created_at="2023-01-01T00:00:00Z"), query, 1.0)
    chosen = best_lessons([r for r in (old, new, other) if r], limit=3)
    assert [r.lesson.id for r in chosen] == ["new", "other"]


def test_each_tier_outweighs_everything_below_it_together() -> None:
    query = LessonQuery("Refresh the OAuth token in src/auth.py", task_type="feature", files=("src/auth.py",),
                        error_signatures=("E1",))
    same_type = score_lesson(make_lesson("type", "Unrelated advice.", task_type="feature"), query, 0.0)
    everything_else = score_lesson(make_lesson("rest", "Refresh the OAuth token of src/auth.py first.",
                                               files=("src/auth.py",), error_signature="E1",
                                               tools=("oauth",)), query, 1.0)
    refiners_only = score_lesson(make_lesson("refine", "Refresh the token of src/auth.py first.",
                                             files=("src/auth.py",), error_signature="E1"), query, 1.0)
    tool_only = score_lesson(make_lesson("tool", "Mind the provider.", tools=("oauth",)), query, 0.0)
    assert same_type and everything_else and refiners_only and tool_only
    assert same_type.score > everything_else.score - tool_only.score  # type over all the rest
    assert tool_only.score > refiners_only.score  # a shared tool over files, signature and words together


def test_one_shared_word_is_no_relevance_and_the_generic_task_type_is_none_either() -> None:
    query = LessonQuery("Refresh the OAuth access token before the release", task_type="task")
    changelog = make_lesson("cl", "List every merged change under the release heading.", task_type="task")
    assert score_lesson(changelog, query, 1.0) is None  # bm25 said 1.0: the only candidate sharing "release"
    two_words = score_lesson(make_lesson("tok", "Cache the access token."), query, 1.0)
    assert two_words is not None and two_words.why["shared_words"] == 2 and two_words.why["text"] == 0.5


def test_a_short_search_matches_on_its_one_word() -> None:
    ranked = score_lesson(make_lesson("a", "The lockfile was stale."), LessonQuery("lockfile"), 1.0)
    assert ranked is not None and ranked.why["text"] == 1.0


def test_an_outcome_record_names_its_tools_and_endpoints() -> None:
    lesson = Lesson.from_record(outcome_record(
        "failed", title="Stripe webhook", whatToDoDifferently="Verify the signature of POST /api/v1/hooks/42 first.",
        tools=["Sentry"]))
    assert lesson is not None
    assert lesson.tools[:3] == ("sentry", "endpoint:/api/v1/hooks/{}", "stripe")
