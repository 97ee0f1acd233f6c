"""Failure digests of real runner output: what is extracted, the size bound, the signature."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from reflection.digest import Digest, error_of_test, estimate_tokens, make_digest, read_digest_line

FIXTURES = Path(__file__).parents[1] / "fixtures" / "outputs"

CALC = """\
class Box:
    def __init__(self, value):
        self.value = value


def add(a, b):
    return a + b + 1


def div(a, b):
    return _divide(a, b)


def _divide(a, b):
    return a / b
"""

TEST_ADD = """\
from calc import add


def test_add():
    assert add(1, 2) == 3


def test_add_zero():
    assert add(0, 0) >= 0


def test_add_type():
    assert isinstance(add(1, 1), int)
"""

TEST_DIV = """\
from calc import div


def test_div():
    assert div(1, 0) == 0
"""

TEST_BROKEN = """\
import nonexistent_dependency_xyz


def test_never_runs():
    pass
"""

TEST_UNITTEST = """\
import unittest

from calc import add, div


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(1, 2), 3)

    def test_div(self):
        div(1, 0)

    def test_ok(self):
        self.assertTrue(True)
"""


def run_python(cwd: Path, *args: str) -> str:
    """Run the interpreter running these tests; return stdout and stderr together."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "NO_COLOR": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(  # the limit stops a hang; a busy machine takes minutes at most
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    return done.stdout + done.stderr


def make_project(root: Path, tests: dict[str, str], calc: str = CALC) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (root / "calc.py").write_text(calc)
    for name, body in tests.items():
        (root / "tests" / name).write_text(body)
    return root


def run_pytest(root: Path) -> str:
    return run_python(root, "-m", "pytest", "-p", "no:cacheprovider", "tests")


@pytest.fixture(scope="module")
def assertion_output(tmp_path_factory: pytest.TempPathFactory) -> str:
    return run_pytest(make_project(tmp_path_factory.mktemp("run"), {"test_add.py": TEST_ADD}))


@pytest.fixture(scope="module")
def exception_output(tmp_path_factory: pytest.TempPathFactory) -> str:
    return run_pytest(make_project(tmp_path_factory.mktemp("run"), {"test_div.py": TEST_DIV}))


# --- pytest, unittest and tracebacks, captured from real runs ------------------------------------


def test_pytest_assertion_failure(assertion_output: str) -> None:
    digest = make_digest(assertion_output, command="python -m pytest tests")

    assert digest.tool == "pytest"
    assert digest.failing_tests == ["tests/test_add.py::test_add"]
    assert digest.first_error == "tests/test_add.py:5: AssertionError: assert 4 == 3"
    assert (digest.passed, digest.failed) == (2, 1)
    assert digest.score == pytest.approx(2 / 3)
    assert "Command: python -m pytest tests" in digest.text
    assert "Failing tests (1): tests/test_add.py::test_add" in digest.text
    assert "Counts: 2 passed, 1 failed" in digest.text
    assert "E       assert 4 == 3" in digest.text  # the error block itself
    assert "Last lines:" in digest.text


def test_pytest_exception_in_code_under_test(exception_output: str) -> None:
    digest = make_digest(exception_output)

    assert digest.failing_tests == ["tests/test_div.py::test_div"]
    assert digest.first_error == "calc.py:15: ZeroDivisionError: division by zero"
    assert (digest.passed, digest.failed) == (0, 1)


def test_pytest_collection_error(tmp_path: Path) -> None:
    project = make_project(tmp_path, {"test_broken.py": TEST_BROKEN, "test_add.py": TEST_ADD})

    digest = make_digest(run_pytest(project))

    assert "tests/test_broken.py" in digest.failing_tests
    assert digest.first_error == (
        "tests/test_broken.py:1: ModuleNotFoundError: No module named 'nonexistent_dependency_xyz'"
    )
    assert digest.failed == 1


def test_unittest_failures_and_counts(tmp_path: Path) -> None:
    project = make_project(tmp_path, {"test_unit.py": TEST_UNITTEST})

    digest = make_digest(run_python(project, "-m", "unittest", "tests.test_unit"))

    assert digest.tool == "unittest"
    assert set(digest.failing_tests) == {
        "tests.test_unit.CalcTest.test_add",
        "tests.test_unit.CalcTest.test_div",
    }
    assert (digest.passed, digest.failed) == (1, 2)
    assert digest.first_error is not None
    # The first block is the ERROR in test_div: the innermost user frame is in calc.py.
    assert digest.first_error.endswith("calc.py:15: ZeroDivisionError: division by zero")


def test_bare_traceback_points_at_innermost_user_frame(tmp_path: Path) -> None:
    make_project(tmp_path, {})
    output = run_python(tmp_path, "-c", "import json, calc; json.loads('{}'); calc.div(1, 0)")

    digest = make_digest(output)

    assert digest.tool == "traceback"
    assert digest.first_error == f"{tmp_path / 'calc.py'}:15: ZeroDivisionError: division by zero"
    assert digest.failing_tests == []
    assert (digest.passed, digest.failed, digest.score) == (None, None, None)


def test_traceback_into_the_standard_library_keeps_the_user_frame(tmp_path: Path) -> None:
    (tmp_path / "load.py").write_text("import json\n\n\ndef load():\n    return json.loads('{')\n")

    digest = make_digest(run_python(tmp_path, "-c", "import load; load.load()"))

    assert digest.first_error is not None
    assert digest.first_error.startswith(f"{tmp_path / 'load.py'}:5: json.decoder.JSONDecodeError")


# --- other tools, from captured outputs ----------------------------------------------------------

CASES = [
    # file, tool, failing tests, first error, passed, failed
    ("mypy.txt", "mypy", [],
     'calc.py:5: error[return-value]: Incompatible return value type (got "str", expected "int")',
     None, None),
    ("ruff.txt", "ruff", [], "calc.py:1: F401: `os` imported but unused", None, None),
    ("ruff_concise.txt", "ruff", [], "calc.py:1: F401: `os` imported but unused", None, None),
    ("tsc.txt", "tsc", [], "src/a.ts:2: TS2322: Type 'string' is not assignable to type 'number'.",
     None, None),
    ("tsc_pretty.txt", "tsc", [],
     "src/a.ts:2: TS2322: Type 'string' is not assignable to type 'number'.", None, None),
    ("jest.txt", "jest", ["math › adds numbers", "math › reads the first name"],
     "src/sum.test.js:5: expect(received).toBe(expected) // Object.is equality "
     "(Expected: 3, Received: 4)", 2, 2),
    ("jest_verbose.txt", "jest", ["math › adds numbers", "math › reads the first name"],
     "src/sum.test.js:5: expect(received).toBe(expected) // Object.is equality "
     "(Expected: 3, Received: 4)", 2, 2),
    ("vitest.txt", "vitest",
     ["src/sum.test.ts > math > adds numbers", "src/sum.test.ts > math > reads the first name"],
     "src/sum.test.ts:6: AssertionError: expected 4 to be 3 // Object.is equality", 1, 2),
    ("go.txt", "go", ["TestAdd", "TestAbs", "TestAbs/negative"],
     "calc_test.go:12: Add(1, 2) = 4; want 3", 2, 2),
    ("go_panic.txt", "go", ["TestDiv"],
     "/home/dev/calc/calc.go:8: panic: runtime error: integer divide by zero", None, 1),
    ("go_build.txt", "go", ["example.com/calc"], "calc_test.go:8: build: undefined: Mul",
     None, None),
    ("cargo.txt", "cargo", ["tests::it_adds", "tests::it_takes_first"],
     "src/lib.rs:15: panic: assertion `left == right` failed left: 4 right: 3", 1, 2),
    ("cargo_build.txt", "cargo", [], "src/lib.rs:2: error[E0277]: cannot add `&str` to `u64`",
     None, None),
]  # fmt: skip


@pytest.mark.parametrize(("name", "tool", "tests", "first_error", "passed", "failed"), CASES)
def test_captured_outputs(
    name: str,
    tool: str,
    tests: list[str],
    first_error: str,
    passed: int | None,
    failed: int | None,
) -> None:
    digest = make_digest((FIXTURES / name).read_text())

    assert digest.tool == tool
    assert digest.failing_tests == tests
    assert digest.first_error == first_error
    assert (digest.passed, digest.failed) == (passed, failed)
    assert read_digest_line(digest.text, "First error") == first_error
    assert "\x1b[" not in digest.text  # colour codes are gone


def test_checkers_list_every_error_and_their_summary() -> None:
    digest = make_digest((FIXTURES / "mypy.txt").read_text())

    assert "calc.py:9: error[arg-type]" in digest.text
    assert "calc.py:10: error[name-defined]" in digest.text
    assert read_digest_line(digest.text, "Summary") == (
        "Found 3 errors in 1 file (checked 1 source file)"
    )


def test_command_names_the_tool_when_the_output_cannot() -> None:
    digest = make_digest("bash: line 1: mypy: command not found\n", command="mypy src")

    assert digest.tool == "mypy"
    assert digest.first_error == "bash: line 1: mypy: command not found"


def test_generic_output_gives_first_error_line_and_last_lines() -> None:
    output = "\n".join(
        ["cc -c main.c", "main.c:3:5: error: unknown type name 'strin'", "make: *** [all] Error 1"]
        + [f"cleanup step {i}" for i in range(5)]
    )

    digest = make_digest(output)

    assert digest.tool == "generic"
    assert digest.first_error == "main.c:3: main.c:3:5: error: unknown type name 'strin'"
    assert digest.text.rstrip().endswith("cleanup step 4")
    assert "Last lines:" in digest.text


# --- the size bound ------------------------------------------------------------------------------


@pytest.mark.parametrize("max_tokens", [0, 20, 200, 1500])
def test_five_megabytes_stay_within_the_budget(assertion_output: str, max_tokens: int) -> None:
    noise = "".join(f"DEBUG worker {i}: processed item {i} ok\n" for i in range(130_000))
    output = assertion_output + noise + assertion_output
    assert len(output) > 5_000_000

    digest = make_digest(output, max_tokens=max_tokens)

    assert estimate_tokens(digest.text) <= max_tokens
    assert digest.failing_tests == ["tests/test_add.py::test_add"]
    assert (digest.passed, digest.failed) == (2, 1)


def test_a_single_huge_line_stays_within_the_budget(exception_output: str) -> None:
    output = "progress: " + "#" * 100_000 + " error at the very end\n" + exception_output

    digest = make_digest(output, max_tokens=300)

    assert estimate_tokens(digest.text) <= 300
    assert digest.first_error == "calc.py:15: ZeroDivisionError: division by zero"


def test_an_output_that_is_one_huge_line() -> None:
    digest = make_digest("Error: " + "x" * 100_000, max_tokens=100)

    assert estimate_tokens(digest.text) <= 100
    assert digest.first_error is not None and len(digest.first_error) < 1000


def test_estimate_tokens_rounds_up() -> None:
    assert [estimate_tokens(t) for t in ("", "a", "abcd", "abcde")] == [0, 1, 1, 2]


# --- the signature -------------------------------------------------------------------------------


def test_same_failure_in_two_directories_has_one_signature(
    tmp_path_factory: pytest.TempPathFactory, assertion_output: str
) -> None:
    again = run_pytest(make_project(tmp_path_factory.mktemp("run"), {"test_add.py": TEST_ADD}))

    assert make_digest(again).signature == make_digest(assertion_output).signature


def test_other_failures_have_other_signatures(
    assertion_output: str, exception_output: str, tmp_path: Path
) -> None:
    other_value = make_project(tmp_path, {"test_add.py": TEST_ADD.replace("== 3", "== 5")})

    signatures = {
        make_digest(assertion_output).signature,
        make_digest(exception_output).signature,
        make_digest(run_pytest(other_value)).signature,
    }

    assert len(signatures) == 3
    assert all(len(s) == 16 and int(s, 16) >= 0 for s in signatures)


def test_signature_ignores_lines_of_frames_outside_the_test(
    tmp_path_factory: pytest.TempPathFactory, exception_output: str
) -> None:
    shifted = "# a comment\n# another\n\n" + CALC  # the raising line moves from 15 to 18
    project = make_project(tmp_path_factory.mktemp("run"), {"test_div.py": TEST_DIV}, shifted)

    digest = make_digest(run_pytest(project))

    assert digest.first_error == "calc.py:18: ZeroDivisionError: division by zero"
    assert digest.signature == make_digest(exception_output).signature


def test_signature_ignores_temp_paths_addresses_timings_and_ids(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    test_repr = """\
from calc import Box


def test_box(tmp_path):
    assert Box(1) == 1, f"{tmp_path} {Box(2)!r}"
"""
    outputs = [
        run_pytest(make_project(tmp_path_factory.mktemp("run"), {"test_box.py": test_repr}))
        for _ in range(2)
    ]
    assert "object at 0x" in outputs[0] and "/pytest-" in outputs[0]
    retimed = (
        outputs[1].replace(" in 0.", " in 7.")
        + "\n2024-05-01T10:11:12Z pid=4242 request 9f86d081884c7d65 done in 12ms\n"
    )

    signatures = {make_digest(out).signature for out in (*outputs, retimed)}

    assert len(signatures) == 1


def test_signature_keeps_the_line_of_the_failing_assertion(tmp_path: Path) -> None:
    moved = TEST_ADD.replace("def test_add():", "\n\ndef test_add():")
    first = make_digest((FIXTURES / "go.txt").read_text())
    second = make_digest(
        (FIXTURES / "go.txt").read_text().replace("calc_test.go:12:", "calc_test.go:15:")
    )
    assert first.signature != second.signature  # another assertion in the test file
    assert make_digest(run_pytest(make_project(tmp_path, {"test_add.py": moved}))).first_error == (
        "tests/test_add.py:7: AssertionError: assert 4 == 3"
    )


# --- the model -----------------------------------------------------------------------------------


def test_digest_is_frozen_and_score_needs_counts() -> None:
    digest = make_digest((FIXTURES / "cargo.txt").read_text())

    with pytest.raises(ValidationError):
        digest.tool = "generic"  # type: ignore[misc]
    assert digest.score == pytest.approx(1 / 3)
    assert Digest(
        tool="go", text="", signature="0" * 16, failing_tests=[], first_error=None,
        passed=0, failed=0,
    ).score is None  # fmt: skip


def test_read_digest_line_finds_fields_only() -> None:
    text = make_digest((FIXTURES / "go.txt").read_text(), command="go test ./...").text

    assert read_digest_line(text, "Command") == "go test ./..."
    assert read_digest_line(text, "Tool") == "go"
    assert read_digest_line(text, "Nothing") is None


@pytest.mark.parametrize(
    "shape",
    ["\n", " \n", "=", "A", "E   ", "assert a ", "FAILED x::y - e\n", '  File "a.py", line 1\n'],
)
def test_degenerate_megabytes_stay_within_the_budget(shape: str) -> None:
    output = shape * (1_000_000 // len(shape))

    digest = make_digest(output, max_tokens=200)

    assert estimate_tokens(digest.text) <= 200
    assert len(digest.signature) == 16


TWO_FAILURES = """\
============================= test session starts ==============================
collected 4 items

test_other.py F                                                          [ 25%]
test_calc.py .F.                                                         [100%]

=================================== FAILURES ===================================
__________________________________ test_other __________________________________

    def test_other():
>       assert other() == 1
E       assert 0 == 1

test_other.py:5: AssertionError
______________________________ TestCalc.test_mul[3] ____________________________

    def test_mul(self, n):
>       assert mul(n, 4) == 12 + n
E       AssertionError: assert 13 == 15

test_calc.py:13: AssertionError
=========================== short test summary info ============================
FAILED test_other.py::test_other - assert 0 == 1
FAILED test_calc.py::TestCalc::test_mul[3] - AssertionError: assert 13 == 15
ERROR test_calc.py::test_db - RuntimeError: no database
========================= 2 failed, 1 passed, 1 error in 0.05s ================
"""


def test_the_error_of_one_named_test_not_of_the_first_failure() -> None:
    assert make_digest(TWO_FAILURES).first_error == "test_other.py:5: AssertionError: assert 0 == 1"
    # Its own section, found by pytest's head line (Class.name[param]).
    assert error_of_test(TWO_FAILURES, "test_calc.py::TestCalc::test_mul[3]") == (
        "test_calc.py:13: AssertionError: assert 13 == 15"
    )
    # No section of its own: the short summary line says how it failed.
    assert error_of_test(TWO_FAILURES, "test_calc.py::test_db") == "test_calc.py: RuntimeError: no database"
    assert error_of_test(TWO_FAILURES, "test_calc.py::test_gone") is None
    assert error_of_test("--- FAIL: TestAdd (0.00s)\nFAIL\texample.com/calc\t0.01s\n", "TestAdd") is None
