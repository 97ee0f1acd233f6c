"""preflight, waived_failures, split_failures and flaky reruns: real pytest runs in tmp dirs.

Each real pytest subprocess costs a fraction of a second, so the judging rules that
need no process (conservative cases, name matching, error wording) run on verdicts
built from recorded output instead.
"""

from __future__ import annotations

import shlex
import sys
import textwrap
from pathlib import Path

import pytest

from orchestrator.checks.envcheck import environment_error
from orchestrator.checks.flaky import flaky_tests, is_flaky, rerun_failing
from orchestrator.checks.preflight import (
    Baseline,
    about_task,
    preflight,
    split_failures,
    waived_failures,
)
from orchestrator.checks.settings import CheckSettings
from orchestrator.checks.verify import CommandResult, Kind, Verdict, verify
from orchestrator.checks.waivers import Waivers
from orchestrator.config import KnownFailure
from reflection.digest import make_digest
from reflection.schema import FailureType

PYTEST = f"{shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider -p no:asyncio"


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, body in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body))
    return root


async def _baseline(root: Path, *, task_text: str = "", tests: list[str] | None = None) -> Baseline:
    checks = CheckSettings(tests=(PYTEST,) if tests is None else tuple(tests), timeout_s=60)
    return await preflight(root, checks, task_text=task_text)


async def _verify(root: Path) -> Verdict:
    return await verify(root, CheckSettings(tests=[PYTEST], timeout_s=60))


# --- environment errors --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_missing_program_is_an_environment_error_that_names_it(tmp_path: Path) -> None:
    baseline = await _baseline(tmp_path, tests=["no-such-tool --run"])
    assert not baseline.verdict.passed
    assert baseline.environment_error is not None
    assert "`no-such-tool`" in baseline.environment_error
    assert "not found" in baseline.environment_error
    assert baseline.failing_tests == frozenset() and not baseline.complete


@pytest.mark.anyio
async def test_a_missing_third_party_module_is_an_environment_error(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "test_uses_pkg.py": """
                import definitely_not_installed_pkg

                def test_pkg():
                    assert definitely_not_installed_pkg
            """,
            "test_fine.py": "def test_fine():\n    assert True\n",
        },
    )
    baseline = await _baseline(tmp_path)
    assert baseline.environment_error is not None
    assert "definitely_not_installed_pkg" in baseline.environment_error
    assert "not installed" in baseline.environment_error
    # A collection error stops pytest before any test runs: the list is not the truth.
    assert not baseline.complete


@pytest.mark.anyio
async def test_imports_of_what_the_task_will_create_are_not_environment_errors(
    tmp_path: Path,
) -> None:
    _write(
        tmp_path,
        {
            "calc.py": "def sub(a, b):\n    return a - b\n",
            "test_calc.py": "from calc import add\n\ndef test_add():\n    assert add(1, 2) == 3\n",
            "test_shapes.py": "import shapes\n\ndef test_area():\n    assert shapes.area(2) == 4\n",
        },
    )
    task = "Add calc.add, and a new module shapes with area(side)."
    baseline = await _baseline(tmp_path, task_text=task)
    assert not baseline.verdict.passed
    assert baseline.environment_error is None
    # Without the task naming it, `shapes` is neither in the repository nor the task's.
    step = baseline.verdict.steps[0]
    blamed = environment_error(step, root=tmp_path, task_text="Add calc.add.")
    assert blamed is not None and "`shapes`" in blamed


def _step(output: str, exit_code: int | None, command: str) -> CommandResult:
    return CommandResult(command=command, kind="test", exit_code=exit_code, output=output)


@pytest.mark.parametrize(
    ("output", "exit_code", "command", "expected"),
    [
        ("/usr/bin/python3: No module named pytest\n", 1, "python -m pytest", "`pytest`"),
        ("/bin/sh: line 1: mypy: command not found\n", 127, "mypy src", "`mypy`"),
        (
            "ERROR: usage: pytest [options] [file_or_dir]\n"
            "pytest: error: unrecognized arguments: --bogus\n",
            4,
            "pytest --bogus",
            "unrecognized arguments: --bogus",
        ),
        ("usage: lint [-h] path\nlint: error: unrecognized option -Z\n", 2, "lint -Z", "-Z"),
        (
            "ERROR: file or directory not found: tests/typo.py\n",
            4,
            "pytest tests/typo.py",
            "typo.py",
        ),
    ],
)
def test_environment_errors_are_one_sentence_naming_the_cause(
    tmp_path: Path, output: str, exit_code: int, command: str, expected: str
) -> None:
    message = environment_error(_step(output, exit_code, command), root=tmp_path)
    assert message is not None
    assert message.startswith(f"The test command `{command}` cannot run: ")
    assert expected in message and message.endswith(".") and "\n" not in message


@pytest.mark.parametrize(
    ("output", "exit_code", "command", "task"),
    [
        ("E       assert 1 == 2\n1 failed in 0.01s\n", 1, "pytest -q", ""),
        ("sh: 1: ./scripts/check.sh: not found\n", 127, "./scripts/check.sh",
         "Write scripts/check.sh"),
        ("ERROR: file or directory not found: tests/test_new.py\n", 4, "pytest tests/test_new.py",
         "Add tests/test_new.py covering parse()"),
        ("Traceback (most recent call last):\nUsage: see docs\n", 1, "python run.py", ""),
    ],
)  # fmt: skip
def test_failures_the_code_or_the_task_can_fix_are_not_environment_errors(
    tmp_path: Path, output: str, exit_code: int, command: str, task: str
) -> None:
    step = _step(output, exit_code, command)
    assert environment_error(step, root=tmp_path, task_text=task) is None


@pytest.mark.anyio
async def test_preflight_runs_every_command_even_after_a_typecheck_failure(tmp_path: Path) -> None:
    checks = CheckSettings(
        typecheck=("echo 'app.py:1: error: Name \"x\" is not defined'; exit 1",),
        tests=("echo first-suite", "echo second-suite"),
        timeout_s=30,
    )
    baseline = await preflight(tmp_path, checks)
    assert baseline.typecheck_failing and baseline.environment_error is None
    assert [s.kind for s in baseline.verdict.steps] == ["typecheck", "test", "test"]
    assert baseline.verdict.failure_type == FailureType.TYPECHECK_FAILURE
    assert "second-suite" in baseline.verdict.steps[-1].output


@pytest.mark.anyio
async def test_a_check_that_times_out_on_the_untouched_tree_is_an_environment_error(tmp_path: Path) -> None:
    # Every attempt would be killed by the same limit: no edit caused the hang.
    checks = CheckSettings(tests=("sleep 30",), timeout_s=0.5)
    baseline = await preflight(tmp_path, checks)
    assert baseline.environment_error == (
        "The test command `sleep 30` timed out after 0.5 s (timeouts.verifySeconds) on the "
        "untouched tree, before any change: it hangs or runs longer than the limit; fix the "
        "hang or raise timeouts.verifySeconds."
    )


# --- pre-existing failures -----------------------------------------------------------------------

CALC = "def add(a, b):\n    return a + b\n"
BROKEN_CALC = "def add(a, b):\n    return a - b\n"
SUITE = """
    from calc import add

    def test_known_bug():
        assert add(0.1, 0.2) == 0.3

    def test_add():
        assert add(2, 3) == 5
"""


def waivers(*tests: str) -> Waivers:
    return Waivers.of(KnownFailure(test=t) for t in tests)


ONE_PYTEST = CheckSettings(tests=(PYTEST,))


@pytest.mark.anyio
async def test_a_failure_from_before_the_task_is_never_waived_unless_the_user_listed_it(
    tmp_path: Path,
) -> None:
    _write(tmp_path, {"calc.py": CALC, "test_calc.py": SUITE})
    baseline = await _baseline(tmp_path)
    assert baseline.environment_error is None
    assert baseline.failing_tests == {"test_calc.py::test_known_bug"} and baseline.complete

    (tmp_path / "calc.py").write_text(CALC + "\n# documented\n")  # leaves only the old bug
    unchanged = await _verify(tmp_path)
    assert not unchanged.passed
    # Failing before the task, failing the same way now, the task names nothing: still the task's.
    assert waived_failures(unchanged, baseline, Waivers(), ONE_PYTEST, "x") == []
    split = split_failures(unchanged, baseline, "Document the project in README", Waivers())
    assert (split.caused, split.before, split.waived) == ([], ["test_calc.py::test_known_bug"], [])
    # The user waived it: then, and only then, the attempt passes apart from it.
    listed = waivers("test_calc.py::test_known_bug")
    assert waived_failures(unchanged, baseline, listed, ONE_PYTEST, "x") == ["test_calc.py::test_known_bug"]

    (tmp_path / "calc.py").write_text(BROKEN_CALC)  # an attempt that breaks test_add as well
    broken = await _verify(tmp_path)
    assert waived_failures(broken, baseline, listed, ONE_PYTEST, "x") == []
    split = split_failures(broken, baseline, "Document the project in README", listed)
    assert (split.caused, split.waived) == (["test_calc.py::test_add"], ["test_calc.py::test_known_bug"])


@pytest.mark.anyio
async def test_a_waived_test_that_passed_before_the_task_counts_when_the_attempt_breaks_it(tmp_path: Path) -> None:
    _write(tmp_path, {"calc.py": CALC, "test_calc.py": SUITE})
    baseline = await _baseline(tmp_path)
    (tmp_path / "calc.py").write_text(BROKEN_CALC)
    broken = await _verify(tmp_path)
    everything = waivers("test_calc.py")  # a whole file waived: its known failure, not new ones
    assert waived_failures(broken, baseline, everything, ONE_PYTEST, "x") == []
    split = split_failures(broken, baseline, "x", everything)
    assert split.caused == ["test_calc.py::test_add"]
    # Without a baseline there is nothing to tell known from new: the user's word stands.
    assert sorted(waived_failures(broken, None, everything, ONE_PYTEST, "x")) == sorted(broken.digest.failing_tests)


PRE = "test_calc.py::test_known_bug"


def _failed(
    output: str, *, exit_code: int | None = 1, kind: Kind = "test", timed_out: bool = False
) -> Verdict:
    step = CommandResult(
        command="pytest", kind=kind, exit_code=exit_code, output=output, timed_out=timed_out
    )
    failure = FailureType.TYPECHECK_FAILURE if kind == "typecheck" else FailureType.TEST_FAILURE
    if step.timed_out:
        failure = FailureType.TIMEOUT
    digest = make_digest(output, command="pytest")
    return Verdict(passed=False, failure_type=failure, digest=digest, steps=[step])


def _known_bug_baseline(commands: int = 1) -> Baseline:
    steps = [CommandResult(command="pytest", kind="test", exit_code=1, output="")] * commands
    return Baseline(
        verdict=Verdict(passed=False, steps=steps),
        failing_tests=frozenset({PRE}),
        messages={PRE: "assert 0.3 == 0.3"},
    )


SHORT = f"=== short test summary info ===\nFAILED {PRE} - assert 0.3 == 0.3\n"


@pytest.mark.parametrize(
    ("verdict", "why"),
    [
        (_failed(SHORT + "3 failed, 1 passed in 0.1s\n"), "counts exceed the listed ids"),
        (_failed(SHORT + "1 failed in 0.1s\n", exit_code=2), "pytest was interrupted"),
        (_failed(SHORT, exit_code=None, timed_out=True), "a timeout"),
        (_failed(SHORT + "1 failed in 0.1s\n", kind="typecheck"), "a typecheck failure"),
        (_failed("Segmentation fault (core dumped)\n", exit_code=139), "a crash"),
    ],
)
def test_nothing_is_waived_when_the_failing_tests_are_not_fully_known(verdict: Verdict, why: str) -> None:
    checks = CheckSettings(typecheck=("pytest",)) if verdict.steps[0].kind == "typecheck" else CheckSettings(
        tests=("pytest",))
    assert waived_failures(verdict, _known_bug_baseline(), waivers(PRE, "*"), checks, "x") == [], why


def test_a_waived_failure_is_not_enough_when_later_checks_did_not_run() -> None:
    verdict = _failed(SHORT + "1 failed in 0.1s\n")
    one, two = CheckSettings(tests=("pytest",)), CheckSettings(tests=("pytest", "npm test"))
    assert waived_failures(verdict, _known_bug_baseline(), waivers(PRE), one, "x") == [PRE]
    assert waived_failures(verdict, _known_bug_baseline(), waivers(PRE), two, "x") == []
    # A task that names the waived test is about it: the waiver is not for that task.
    assert waived_failures(verdict, _known_bug_baseline(), waivers(PRE), one, "Make test_known_bug pass") == []


NEW = "test_calc.py::test_add"


def test_split_failures_puts_what_the_attempt_broke_first_then_what_failed_before_then_the_waived() -> None:
    # The old failure ran first; the attempt broke test_add. Neither list needs to be complete.
    output = f"{SHORT}FAILED {NEW} - assert -1 == 5\n2 failed, 1 passed in 0.1s\n"
    split = split_failures(_failed(output), _known_bug_baseline(), "Update the README", Waivers())
    assert (split.caused, split.before, split.waived) == ([NEW], [PRE], [])
    assert split.ordered == [NEW, PRE]
    split = split_failures(_failed(output), _known_bug_baseline(), "Update the README", waivers(PRE))
    assert (split.caused, split.before, split.waived) == ([NEW], [], [PRE])
    # Failing another way than at baseline: the attempt's doing.
    another = f"=== short test summary info ===\nFAILED {PRE} - assert 0.1 == 0.3\n"
    split = split_failures(_failed(another + "1 failed in 0.1s\n"), _known_bug_baseline(), "x", Waivers())
    assert (split.caused, split.before) == ([PRE], [])


def test_tests_failing_before_that_the_task_names_lead_the_retry() -> None:
    other = "test_other.py::test_other"
    output = (f"=== short test summary info ===\nFAILED {other} - assert 0 == 1\nFAILED {PRE} - assert 0.3 == 0.3\n"
              "2 failed in 0.1s\n")
    baseline = _known_bug_baseline().model_copy(update={
        "failing_tests": frozenset({PRE, other}), "messages": {PRE: "assert 0.3 == 0.3", other: "assert 0 == 1"}})
    split = split_failures(_failed(output), baseline, "Fix test_known_bug", Waivers())
    assert split.before == [PRE, other]


@pytest.mark.parametrize(
    ("pattern", "test", "waived"),
    [
        ("tests/test_x.py::test_y", "tests/test_x.py::test_y", True),
        ("tests/test_x.py::test_y", "tests/test_x.py::test_y[1-2]", True),
        ("tests/test_x.py::test_y[1-2]", "tests/test_x.py::test_y[1-2]", True),
        ("tests/test_x.py::test_y[1-2]", "tests/test_x.py::test_y[3-4]", False),
        ("tests/test_x.py", "tests/test_x.py::TestA::test_b", True),
        ("tests/test_x.py::TestA", "tests/test_x.py::TestA::test_b", True),
        ("tests/slow/*", "tests/slow/test_net.py::test_get", True),
        ("tests/test_x.py::test_y", "tests/test_x.py::test_yz", False),
        ("tests/test_x", "tests/test_x.py::test_y", False),
        ("TestParse", "TestParseDate", False),
        ("TestParse", "TestParse/empty", False),
    ],
)
def test_a_waiver_names_a_test_its_file_or_class_or_a_glob(pattern: str, test: str, waived: bool) -> None:
    assert (waivers(pattern).entry_for(test) is not None) is waived


@pytest.mark.parametrize(
    ("task", "about"),
    [
        ("Fix tests/test_calc.py::TestAdd::test_floats[0.1]", True),
        ("Make test_floats pass", True),
        ("Clean up test_calc.py", True),
        ("Clean up tests/test_calc.py", True),
        ("Add test_floats_more", False),
        # A test is about what it is named after: test_floats tests floats.
        ("Handle floats in add", True),
        # The module a test file is named after counts: a task on calc is about test_calc.
        ("Add a subtract function to calc", True),
        ("Make the failing tests pass", True),
        ("Update the README", False),
    ],
)
def test_a_task_is_about_a_test_it_names_by_id_function_or_file(task: str, about: bool) -> None:
    assert about_task("tests/test_calc.py::TestAdd::test_floats[0.1]", task) is about


# --- flaky tests ---------------------------------------------------------------------------------

FLAKY = """
    from pathlib import Path

    def test_flaky():
        marker = Path("ran-once")
        first = not marker.exists()
        marker.touch()
        assert not first, "fails on the first run only"
"""
BROKEN = "def test_broken():\n    assert 1 == 2\n"


@pytest.mark.anyio
async def test_a_test_that_passes_on_rerun_is_flaky(tmp_path: Path) -> None:
    _write(tmp_path, {"test_flaky.py": FLAKY})
    first = await _verify(tmp_path)
    assert not first.passed
    rerun = await rerun_failing(tmp_path, first, CheckSettings(timeout_s=60, digest_tokens=1500))
    assert rerun.passed and rerun.tests_passed == 1
    assert is_flaky(first, rerun)
    assert flaky_tests(first, rerun) == ["test_flaky.py::test_flaky"]


@pytest.mark.anyio
async def test_a_consistently_failing_test_is_not_flaky(tmp_path: Path) -> None:
    _write(tmp_path, {"test_flaky.py": FLAKY, "test_broken.py": BROKEN})
    first = await _verify(tmp_path)
    rerun = await rerun_failing(tmp_path, first, CheckSettings(timeout_s=60, digest_tokens=1500))
    assert not rerun.passed
    assert rerun.digest is not None
    assert rerun.digest.failing_tests == ["test_broken.py::test_broken"]
    assert not is_flaky(first, rerun)
    # The flaky one is still reported, for the run log.
    assert flaky_tests(first, rerun) == ["test_flaky.py::test_flaky"]


@pytest.mark.anyio
async def test_rerun_keeps_earlier_passed_steps_and_reruns_only_the_failing_one(
    tmp_path: Path,
) -> None:
    counter = tmp_path / "runs"
    first = await verify(
        tmp_path,
        CheckSettings(
            typecheck=["echo checked"],
            tests=[f"echo x >> {counter}; exit 1"],
            timeout_s=30,
        ),
    )
    rerun = await rerun_failing(tmp_path, first, CheckSettings(timeout_s=30, digest_tokens=500))
    assert [s.kind for s in rerun.steps] == ["typecheck", "test"]
    assert counter.read_text() == "x\nx\n"
    assert not is_flaky(first, rerun)  # failed again without naming tests: no evidence
    already = rerun.model_copy(update={"passed": True})
    passed = await rerun_failing(tmp_path, already, CheckSettings(timeout_s=30))
    assert counter.read_text() == "x\nx\n"  # nothing to rerun
    assert passed.passed


def test_a_task_that_names_one_test_of_a_file_is_not_about_its_neighbours() -> None:
    task_text = "Make tests/test_more.py::test_sub pass"
    assert about_task("tests/test_more.py::test_sub", task_text)
    assert not about_task("tests/test_more.py::test_mul", task_text)
    assert about_task("tests/test_more.py::test_mul", "Fix tests/test_more.py")  # the whole file
