"""The heuristic reflection: one context per rule, and drafts that name what failed."""

from __future__ import annotations

from pathlib import Path

import pytest

from reflection.classify import classify
from reflection.digest import make_digest
from reflection.schema import FailureCategory, FailureContext, FailureType, ReflectionDraft

FIXTURES = Path(__file__).parents[1] / "fixtures" / "outputs"

PYTEST_OUTPUT = """\
============================= test session starts ==============================
collected 3 items

tests/test_text.py .F.                                                   [100%]

=================================== FAILURES ===================================
_________________________________ test_reverse _________________________________

    def test_reverse():
>       assert reverse("hello") == "olleh"
E       AssertionError: assert 'hello' == 'olleh'

tests/test_text.py:9: AssertionError
=========================== short test summary info ============================
FAILED tests/test_text.py::test_reverse - AssertionError: assert 'hello' == 'olleh'
========================= 1 failed, 2 passed in 0.03s ==========================
"""


def pytest_failure(test: str, place: str, error: str) -> str:
    """A pytest run with one failure: `error` is the `E` line, e.g. `TypeError: ...`."""
    file, line = place.rsplit(":", 1)
    kind = error.split(":", 1)[0] if ":" in error and " " not in error.split(":")[0] else ""
    return (
        PYTEST_OUTPUT.replace("test_reverse", test)
        .replace("tests/test_text.py:9: AssertionError", f"{file}:{line}: {kind or 'Error'}")
        .replace("AssertionError: assert 'hello' == 'olleh'", error)
    )


def context(
    output: str,
    *,
    failure_type: FailureType = FailureType.TEST_FAILURE,
    command: str | None = None,
    previous_signature: str | None = None,
    files: tuple[str, ...] = ("text.py",),
) -> FailureContext:
    digest = make_digest(output, command=command)
    return FailureContext(
        session_id="run-1",
        task_id="task-1",
        subtask_id="task-1.1",
        attempt_number=2,
        subtask_title="Reverse strings",
        failure_type=failure_type,
        digest=digest.text,
        error_signature=digest.signature,
        previous_signature=previous_signature,
        failing_tests=digest.failing_tests,
        files_modified=list(files),
    )


def text_of(draft: ReflectionDraft) -> str:
    return " ".join([draft.analysis, draft.suggestion, *draft.action_items])


def assert_well_formed(draft: ReflectionDraft) -> None:
    assert 0.3 <= draft.confidence <= 0.6
    assert 0 < len(draft.analysis) <= 500 and 0 < len(draft.suggestion) <= 500
    assert 1 <= len(draft.action_items) <= 5
    assert all(0 < len(item) <= 200 for item in draft.action_items)


def test_other_test_failure_is_root_cause_naming_test_place_and_assertion() -> None:
    draft = classify(context(PYTEST_OUTPUT))

    assert draft.category == FailureCategory.ROOT_CAUSE
    assert "tests/test_text.py::test_reverse" in draft.analysis
    assert "tests/test_text.py:9" in draft.analysis
    assert "assert 'hello' == 'olleh'" in draft.analysis
    assert "text.py" in draft.suggestion  # the file this attempt changed
    assert_well_formed(draft)


def test_repeated_failure_is_an_approach_error() -> None:
    first = context(PYTEST_OUTPUT)
    ctx = context(PYTEST_OUTPUT, previous_signature=first.error_signature)

    draft = classify(ctx)

    assert ctx.repeats_previous
    assert draft.category == FailureCategory.APPROACH_ERROR
    assert "same failure as the last attempt" in draft.analysis
    assert "did not address it" in draft.analysis
    assert "test_reverse" in draft.analysis
    assert_well_formed(draft)


def test_missing_third_party_module_is_environment() -> None:
    output = pytest_failure(
        "test_fetch", "tests/test_fetch.py:1", "ModuleNotFoundError: No module named 'requests'"
    )

    draft = classify(context(output))

    assert draft.category == FailureCategory.ENVIRONMENT
    assert "'requests'" in draft.analysis
    assert "tests/test_fetch.py:1" in draft.analysis
    assert_well_formed(draft)


def test_missing_project_module_is_not_environment() -> None:
    output = pytest_failure(
        "test_fetch", "tests/test_fetch.py:1", "ModuleNotFoundError: No module named 'text'"
    )

    draft = classify(context(output, files=("text.py",)))

    assert draft.category == FailureCategory.MISCONCEPTION


def test_command_not_found_is_environment() -> None:
    output = "sh: 1: tsc: not found\nnpm ERR! code 127\n"

    typecheck = FailureType.TYPECHECK_FAILURE
    draft = classify(context(output, command="npm run typecheck", failure_type=typecheck))

    assert draft.category == FailureCategory.ENVIRONMENT
    assert "'tsc'" in draft.analysis
    assert_well_formed(draft)


@pytest.mark.parametrize(
    ("error", "named"),
    [
        ("PermissionError: [Errno 13] Permission denied: '/var/lib/app/cache'", "permission"),
        ("KeyError: 'PAYMENTS_API_TOKEN'", "PAYMENTS_API_TOKEN"),
        ("RuntimeError: environment variable DATABASE_URL is not set", "DATABASE_URL"),
    ],
)
def test_permission_and_missing_env_vars_are_environment(error: str, named: str) -> None:
    output = pytest_failure("test_save", "app/store.py:14", error)

    draft = classify(context(output))

    assert draft.category == FailureCategory.ENVIRONMENT
    assert named in draft.analysis
    assert "app/store.py:14" in draft.analysis


def test_timeout_is_verification_naming_the_slowest_step() -> None:
    digest = (
        "Tool: pytest\nCommand: pytest -q --durations=3\n"
        "Last lines:\n"
        "============================= slowest 3 durations ==============================\n"
        "0.51s call     tests/test_sync.py::test_small\n"
        "29.87s call     tests/test_sync.py::test_full_mirror\n"
        "0.02s setup    tests/test_sync.py::test_small\n"
        "[killed after 30s]\n"
    )
    ctx = FailureContext(
        session_id="s", task_id="t", subtask_id="t.1", attempt_number=1,
        subtask_title="Mirror folders", failure_type=FailureType.TIMEOUT, digest=digest,
    )  # fmt: skip

    draft = classify(ctx)

    assert draft.category == FailureCategory.VERIFICATION
    assert "tests/test_sync.py::test_full_mirror" in draft.analysis
    assert "29.87s" in draft.analysis
    assert_well_formed(draft)


def test_timeout_without_durations_names_the_last_test_that_ran() -> None:
    output = "=== RUN   TestParse\n--- PASS: TestParse (0.00s)\n=== RUN   TestWatch\n"

    draft = classify(context(output, failure_type=FailureType.TIMEOUT, command="go test ./..."))

    assert draft.category == FailureCategory.VERIFICATION
    assert "TestWatch" in draft.analysis


@pytest.mark.parametrize(
    ("fixture", "code", "place"),
    [("mypy.txt", "return-value", "calc.py:5"), ("tsc.txt", "TS2322", "src/a.ts:2")],
)
def test_typecheck_failure_is_misconception_naming_code_and_place(
    fixture: str, code: str, place: str
) -> None:
    output = (FIXTURES / fixture).read_text()

    draft = classify(context(output, failure_type=FailureType.TYPECHECK_FAILURE))

    assert draft.category == FailureCategory.MISCONCEPTION
    assert code in draft.analysis
    assert place in draft.analysis
    assert_well_formed(draft)


@pytest.mark.parametrize(
    ("error", "why"),
    [
        ("AssertionError: assert 4 == 3", "off by one"),
        ("AssertionError: assert None == 0", "boundary value"),
        ("AssertionError: assert '' == 'a'", "boundary value"),
        ("IndexError: list index out of range", "empty, zero or last-element"),
    ],
)
def test_boundary_values_are_edge_cases(error: str, why: str) -> None:
    output = pytest_failure("test_count", "tests/test_count.py:21", error)

    draft = classify(context(output))

    assert draft.category == FailureCategory.EDGE_CASE
    assert why in draft.analysis
    assert "tests/test_text.py::test_count" in draft.analysis
    assert "tests/test_count.py:21" in draft.analysis


def test_edge_case_from_other_runners() -> None:
    draft = classify(context((FIXTURES / "go.txt").read_text()))

    assert draft.category == FailureCategory.EDGE_CASE
    assert "TestAdd" in draft.analysis and "calc_test.go:12" in draft.analysis


@pytest.mark.parametrize(
    ("error", "category"),
    [
        ("TypeError: reverse() takes 1 positional argument but 2 were given",
         FailureCategory.MISCONCEPTION),
        ("AttributeError: 'str' object has no attribute 'reversed'", FailureCategory.MISCONCEPTION),
        ("AttributeError: 'NoneType' object has no attribute 'strip'", FailureCategory.ROOT_CAUSE),
        ("NameError: name 'revers' is not defined", FailureCategory.ROOT_CAUSE),
        ("TypeError: unsupported operand type(s) for +: 'int' and 'str'",
         FailureCategory.ROOT_CAUSE),
    ],
)  # fmt: skip
def test_errors_in_code_under_test(error: str, category: FailureCategory) -> None:
    output = pytest_failure("test_reverse", "text.py:7", error)

    draft = classify(context(output))

    assert draft.category == category
    assert "text.py:7" in draft.analysis
    assert error.split(":", 1)[0] in draft.analysis
    assert_well_formed(draft)


def test_reads_a_first_error_field_when_the_context_has_one() -> None:
    class ContextWithFirstError(FailureContext):
        first_error: str | None = None

    ctx = ContextWithFirstError(
        session_id="s", task_id="t", subtask_id="t.1", attempt_number=1, subtask_title="Parse",
        failure_type=FailureType.RUNTIME_ERROR, digest="process exited with status 1",
        first_error="src/parse.py:40: TypeError: parse() missing 1 required positional argument",
    )  # fmt: skip

    draft = classify(ctx)

    assert draft.category == FailureCategory.MISCONCEPTION
    assert "src/parse.py:40" in draft.analysis


def test_no_recognisable_error_falls_back_with_low_confidence() -> None:
    ctx = FailureContext(
        session_id="s", task_id="t", subtask_id="t.1", attempt_number=1, subtask_title="Build",
        failure_type=FailureType.RUNTIME_ERROR, digest="Tool: generic\nLast lines:\ndone\n",
    )  # fmt: skip

    draft = classify(ctx)

    assert draft.category == FailureCategory.ROOT_CAUSE
    assert draft.confidence == pytest.approx(0.3)
    assert_well_formed(draft)


def test_huge_names_and_messages_stay_within_limits() -> None:
    long_test = "test_" + "x" * 3000
    output = pytest_failure(long_test, "tests/test_long.py:3", "AssertionError: " + "y" * 5000)

    draft = classify(context(output, files=tuple(f"pkg/module_{i}.py" for i in range(50))))

    assert_well_formed(draft)
    assert "test_xxx" in text_of(draft)


def test_a_known_failure_is_marked_and_the_one_the_attempt_caused_leads() -> None:
    old, new = "test_other.py::test_other", "test_calc.py::test_mul"
    # The digest leads with the old failure, as the runner printed it first.
    digest = make_digest(
        pytest_failure("test_other", "test_other.py:5", "assert 0 == 1"), command="pytest"
    ).text
    ctx = FailureContext(
        session_id="s", task_id="T-1", subtask_id="T-1.1", attempt_number=1,
        subtask_title="Fix add", failure_type=FailureType.TEST_FAILURE, digest=digest,
        failing_tests=[old, new], preexisting_tests=[old],
        first_error="test_calc.py:13: AssertionError: assert 13 == 12",
    )
    analysis = classify(ctx).analysis
    assert analysis.startswith(
        "Test test_calc.py::test_mul failed at test_calc.py:13 with AssertionError: assert 13 == 12 "
        "(test test_other.py::test_other fails too, but it is a known failure from before the task, "
        "not caused by this attempt)"
    )
    # Without the new failure's own error, the digest's (the old test's) is not borrowed.
    unknown = classify(ctx.model_copy(update={"first_error": None})).analysis
    assert unknown.startswith("Test test_calc.py::test_mul failed with")
    assert "assert 0 == 1" not in unknown


@pytest.mark.parametrize(
    "error",
    [
        "AssertionError: assert load('../config/settings.py') == 'a...'",
        "AssertionError: assert 'a  b' == 'a b'",  # the spacing is the whole difference
    ],
)
def test_what_a_reflection_quotes_stays_byte_exact(error: str) -> None:
    draft = classify(context(pytest_failure("test_load", "tests/test_load.py:4", error)))

    assert error in draft.analysis


def test_a_quote_that_ends_its_own_sentence_gets_no_second_stop() -> None:
    error = "TypeError: read() got an unexpected keyword argument 'path'."
    draft = classify(context(pytest_failure("test_read", "tests/test_read.py:4", error)))

    assert f"{error} The test expects an API the code does not provide." in draft.analysis
    assert ".." not in draft.analysis and ".:" not in draft.analysis
