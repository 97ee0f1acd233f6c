"""What a task is about: each rule adds tests, none guesses one out of a bug."""

from __future__ import annotations

import pytest

from orchestrator.checks.waivers import Waivers
from orchestrator.config import KnownFailure
from orchestrator.judging.about import about, needs_proof

FLOATS = "tests/test_calc.py::TestAdd::test_floats[0.1]"
NEGATIVE = "tests/test_calc.py::test_add_negative"
REORDER = "tests/test_todo.py::test_reorder"
FAILING = [FLOATS, NEGATIVE, REORDER]


@pytest.mark.parametrize(
    ("text", "kind", "found", "rule"),
    [
        (f"Fix {FLOATS}", "bug", {FLOATS}, "named"),
        ("Make test_floats pass", "task", {FLOATS, NEGATIVE}, "named"),  # its file's failing tests go with it
        ("Clean up tests/test_calc.py", "chore", {FLOATS, NEGATIVE}, "named"),
        ("add() in calc.py returns a - b", "bug", {FLOATS, NEGATIVE}, "code"),
        ("Implement `reorder` in todo", "feature", {REORDER}, "code"),
        ("add a reorder command to the app", "feature", set(), "none"),  # plain words never match
        ("The calculator sums wrong", "bug", set(FAILING), "every failing test"),
        ("Make the failing tests pass", "task", set(FAILING), "every failing test"),
        ("Say in the README what add() returns", "docs", set(), "none"),  # docs: only what it names
        ("Update the README", "task", set(), "none"),
    ],
)
def test_the_tests_a_task_is_about(text: str, kind: str, found: set[str], rule: str) -> None:
    topic = about(text, kind, FAILING)
    assert (set(topic.tests), topic.rule) == (found, rule)


def test_naming_one_test_by_id_leaves_its_neighbours_to_other_tasks() -> None:
    assert about("Make tests/test_calc.py::test_add_negative pass", "bug", FAILING).tests == {NEGATIVE}


def test_a_failing_test_in_a_file_the_attempt_changed_is_always_its_own() -> None:
    topic = about("add a reorder command to the app", "feature", FAILING, touched=["tests/test_todo.py"])
    assert set(topic.tests) == {REORDER} and topic.rule == "its files"


def test_a_waiver_narrows_only_a_bug_that_names_nothing() -> None:
    waived = Waivers.of([KnownFailure(test="tests/test_todo.py")])
    vague = about("The calculator sums wrong", "bug", FAILING, waivers=waived)
    assert set(vague.tests) == {FLOATS, NEGATIVE} and vague.waived == (REORDER,)
    named = about("Fix tests/test_todo.py", "bug", FAILING, waivers=Waivers.of([KnownFailure(test="tests/*")]))
    assert set(named.tests) == {REORDER} and named.waived == ()


@pytest.mark.parametrize(("kind", "needed"), [("bug", True), ("Feature", True), ("regression", True),
                                              ("docs", False), ("chore", False), ("task", False)])
def test_a_bug_or_a_feature_needs_a_test_that_shows_the_change(kind: str, needed: bool) -> None:
    assert needs_proof(kind) is needed
