"""Each test's outcome by pytest's own id, from the report pytest is asked for."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from projects import git

from orchestrator.checks.settings import CheckSettings
from orchestrator.git.repo import Repo
from orchestrator.judging.export import JudgeTree
from orchestrator.judging.sessions import run_checks

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
TESTS = '''import pytest


class TestAdd:
    @pytest.mark.parametrize("n", [1, 2])
    def test_double(self, n):
        assert n * 2 == n + n

    def test_wrong(self):
        assert 1 == 2


@pytest.mark.skip(reason="later")
def test_later():
    pass


def test_plain():
    pass
'''


@pytest.fixture
def judge(git_repo: Path, tmp_path: Path):
    (git_repo / "tests").mkdir()
    (git_repo / "tests" / "test_ids.py").write_text(TESTS)
    (git_repo / "tests" / "test_broken.py").write_text("import not_a_module\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "tests")
    repo = Repo(git_repo)
    tree = JudgeTree(repo, home=tmp_path)
    yield repo, tree
    tree.remove()


@pytest.mark.anyio
async def test_every_test_is_reported_by_the_id_pytest_prints(judge) -> None:
    repo, tree = judge
    run = await run_checks(tree, repo.tree_of("HEAD"), CheckSettings(tests=(f"{PYTEST} tests",), timeout_s=120))

    assert run.reported
    assert dict(run.outcomes) == {
        "tests/test_ids.py::TestAdd::test_double[1]": "passed",
        "tests/test_ids.py::TestAdd::test_double[2]": "passed",
        "tests/test_ids.py::TestAdd::test_wrong": "failed",
        "tests/test_ids.py::test_later": "skipped",
        "tests/test_ids.py::test_plain": "passed",
        "tests/test_broken.py": "failed",  # it cannot be collected: the others run all the same
    }
    assert run.failing() == (frozenset({"tests/test_ids.py::TestAdd::test_wrong", "tests/test_broken.py"}), True)


@pytest.mark.anyio
async def test_a_runner_that_refuses_the_report_is_run_as_the_user_runs_it(judge) -> None:
    repo, tree = judge
    command = f"{PYTEST} -p no:junitxml tests/test_ids.py"
    run = await run_checks(tree, repo.tree_of("HEAD"), CheckSettings(tests=(command,), timeout_s=120))

    assert not run.reported and run.outcomes == {}
    assert run.verdict.tests_failed == 1 and run.verdict.tests_passed == 3  # its own output still counts
    assert run.failing() == (frozenset({"tests/test_ids.py::TestAdd::test_wrong"}), True)


@pytest.mark.anyio
async def test_a_command_that_runs_pytest_twice_reports_no_ids(judge) -> None:
    repo, tree = judge
    twice = f"{PYTEST} tests/test_ids.py -k plain; {PYTEST} tests/test_ids.py -k double"
    run = await run_checks(tree, repo.tree_of("HEAD"), CheckSettings(tests=(twice,), timeout_s=120))

    assert not run.reported  # one report file for two sessions: not the whole run
