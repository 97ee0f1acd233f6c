"""preflight, environment errors and waivers: real pytest runs in tmp dirs.

Each real pytest subprocess costs a fraction of a second, so the rules that need no
process (error wording, waiver patterns) run on recorded output instead.
"""

from __future__ import annotations

import shlex
import sys
import textwrap
from pathlib import Path

import pytest

from orchestrator.checks.envcheck import environment_error
from orchestrator.checks.preflight import Baseline, preflight
from orchestrator.checks.settings import CheckSettings
from orchestrator.checks.verify import CommandResult, Verdict, verify
from orchestrator.checks.waivers import Waivers
from orchestrator.config import KnownFailure
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


# --- waivers -------------------------------------------------------------------------------------


def waivers(*tests: str) -> Waivers:
    return Waivers.of(KnownFailure(test=t) for t in tests)


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
