"""Which paths are tests, and which files say how the tests run: the judge takes them
from the base for the old tests' run."""

from __future__ import annotations

import pytest

from orchestrator.judging.test_paths import (
    DEFAULT_TEST_GLOBS,
    command_scripts,
    is_test_path,
    judged_from_base,
    runner_section,
)

# --- which paths are tests -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "test_calc.py",
        "src/pkg/test_calc.py",
        "calc_test.py",
        "conftest.py",
        "pkg/sub/conftest.py",
        "tests/helpers.py",
        "tests/fixtures/data/expected.json",
        "packages/api/tests/test_routes.py",
        "test/unit/thing.js",
        "app/tests.py",
        "src/calc.test.ts",
        "src/calc.test.jsx",
        "web/calc.test.mjs",
        "src/calc.spec.ts",
        "src/__tests__/calc.js",
        "__tests__/deep/er/calc.tsx",
        "calc/calc_test.go",
        "crates/core/tests/integration.rs",
        "./tests/test_calc.py",
    ],
)
def test_usual_test_paths_of_each_ecosystem_are_tests(path: str) -> None:
    assert is_test_path(path, DEFAULT_TEST_GLOBS)


@pytest.mark.parametrize(
    "path",
    [
        "calc.py",
        "src/calc.py",
        "src/latest.py",
        "src/contest.py",
        "src/testing_utils.py",
        "src/attest_x.py",
        "src/calc.ts",
        "src/calc.testing.ts",
        "cmd/main.go",
        "src/lib.rs",
        "docs/testing.md",
        "mytests/x.py",
        "tests",
    ],
)
def test_ordinary_source_paths_are_not_tests(path: str) -> None:
    assert not is_test_path(path, DEFAULT_TEST_GLOBS)


def test_double_star_crosses_folders_and_single_star_does_not() -> None:
    assert is_test_path("a/b/c/d.txt", ["a/**"])
    assert is_test_path("spec/models/user_spec.rb", ["spec/**/*_spec.rb"])
    assert is_test_path("spec/user_spec.rb", ["spec/**/*_spec.rb"])  # ** may be no folder
    assert not is_test_path("a/b/c.txt", ["a/*.txt"])
    assert is_test_path("a/c.txt", ["a/*.txt"])


def test_glob_without_slash_matches_file_name_in_any_folder_and_braces_expand() -> None:
    globs = ["*.check.{py,sh}"]
    assert is_test_path("deep/down/run.check.sh", globs)
    assert is_test_path("run.check.py", globs)
    assert not is_test_path("run.check.rb", globs)


def test_leading_slash_anchors_a_glob_at_the_repository_root() -> None:
    assert is_test_path("tests/x.py", ["/tests/**"])
    assert not is_test_path("vendor/lib/tests/x.py", ["/tests/**"])
    assert is_test_path("vendor/lib/tests/x.py", ["tests/**"])


def test_custom_globs_replace_the_defaults() -> None:
    assert is_test_path("checks/verify_calc.py", ["checks/**"])
    assert not is_test_path("tests/test_calc.py", ["checks/**"])


# --- the runner's configuration ------------------------------------------------------------------


@pytest.mark.parametrize("path", ["pytest.ini", "tox.ini", "pkg/conftest.py", "setup.cfg", "pyproject.toml",
                                  "jest.config.js", "Makefile", "tests/test_calc.py", "tests/__init__.py"])
def test_tests_and_the_runners_configuration_are_judged_from_the_base(path: str) -> None:
    assert judged_from_base(path)


@pytest.mark.parametrize("path", ["calc.py", "src/pkg/core.py", "README.md", "docs/index.md"])
def test_code_and_docs_are_the_candidates_own(path: str) -> None:
    assert not judged_from_base(path)


def test_a_script_the_test_command_runs_is_judged_from_the_base() -> None:
    scripts = command_scripts(["./run_tests.sh -q", "bash scripts/check.sh", "python -m pytest -q tests"])
    assert {"run_tests.sh", "scripts/check.sh"} <= scripts
    assert judged_from_base("scripts/check.sh", scripts=scripts)
    assert not judged_from_base("src/app.py", scripts=scripts)


def test_a_pyproject_change_outside_the_test_sections_leaves_the_runner_as_it_was() -> None:
    base = b'[project]\nname = "calc"\n[tool.pytest.ini_options]\naddopts = "-q"\n'
    more_deps = base.replace(b'name = "calc"', b'name = "calc"\ndependencies = ["attrs"]')
    hidden = base.replace(b'addopts = "-q"', b'addopts = "-q --deselect tests/test_calc.py::test_add"')
    section = b'[tool.pytest.ini_options]\naddopts = "-q"\n'
    dotted = b'tool.pytest.ini_options.addopts = "--ignore=tests"\n' + base.replace(section, b"")
    assert runner_section("pyproject.toml", more_deps) == runner_section("pyproject.toml", base)
    assert runner_section("pyproject.toml", hidden) != runner_section("pyproject.toml", base)
    assert runner_section("pyproject.toml", dotted) != runner_section("pyproject.toml", base)


def test_a_setup_cfg_test_section_and_an_unreadable_file_count_as_changes() -> None:
    base = b"[metadata]\nname = calc\n"
    assert runner_section("setup.cfg", base + b"[tool:pytest]\naddopts = -k 'not add'\n") != runner_section(
        "setup.cfg", base)
    assert runner_section("setup.cfg", b"[broken\n") == b"[broken\n"
    assert runner_section("pyproject.toml", None) is None
