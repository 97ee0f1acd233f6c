"""Test integrity guard: edited, deleted or skipped tests are caught; real work is not."""

from __future__ import annotations

from pathlib import Path

import pytest
from projects import git

from orchestrator.checks.integrity import (
    DEFAULT_TEST_GLOBS,
    IntegrityResult,
    check_integrity,
    created_paths,
    deleted_paths,
    find_skip_markers,
    is_test_path,
)
from orchestrator.git.repo import Repo

REMEDY = " — fix the code, not the tests"


def _new_file_diff(path: str, lines: list[str]) -> str:
    """A git diff that creates `path` with `lines`."""
    body = "".join(f"+{line}\n" for line in lines)
    return (
        f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..1111111\n"
        f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{len(lines)} @@\n{body}"
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


# --- skip markers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "@pytest.mark.skip(reason='flaky')",
        "@pytest.mark.skipif(sys.platform == 'linux', reason='x')",
        "@pytest.mark.xfail",
        "pytestmark = pytest.mark.skip",
        "    pytest.skip('later')",
        "    pytest.xfail('known bug')",
        "@unittest.skip('broken')",
        "@unittest.expectedFailure",
        "        self.skipTest('not now')",
        "it.skip('adds', () => {})",
        "test.skip('adds', () => {})",
        "describe.skip('calc', () => {})",
        "xit('adds', () => {})",
        "xdescribe('calc', () => {})",
        "it.todo('adds negatives')",
        "it.only('the one test that passes', () => {})",
        '\tt.Skip("flaky on CI")',
        "\tt.SkipNow()",
        "    #[ignore]",
        '#[ignore = "slow"]',
    ],
)
def test_added_skip_markers_of_each_ecosystem_are_found(line: str) -> None:
    diff = _new_file_diff("tests/test_calc.py", ["first = 1", line])
    assert find_skip_markers(diff) == [f"tests/test_calc.py:2: {line.strip()}"]


@pytest.mark.parametrize(
    "line",
    [
        "# @pytest.mark.skip is not used here",
        "// it.skip is forbidden in this repo",
        "def skip_blank_lines(text):",
        "result = unskip(item)",
        "fixit(item)",
        "assert testskip == 1",
    ],
)
def test_comments_and_lookalikes_are_not_markers(line: str) -> None:
    assert find_skip_markers(_new_file_diff("tests/test_calc.py", [line])) == []


def test_markers_are_reported_with_their_line_in_the_new_file(git_repo: Path) -> None:
    tests = git_repo / "tests"
    tests.mkdir()
    original = ["from calc import add", "", "", "def test_add():", "    assert add(2, 2) == 4", ""]
    (tests / "test_calc.py").write_text("\n".join(original))
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "tests")
    base = git(git_repo, "rev-parse", "HEAD").strip()
    edited = [*original[:3], "@pytest.mark.skip(reason='wip')", *original[3:]]
    (tests / "test_calc.py").write_text("\n".join(["import pytest", *edited]))
    diff = Repo(git_repo).diff(base, set())
    assert find_skip_markers(diff) == ["tests/test_calc.py:5: @pytest.mark.skip(reason='wip')"]


def _module(*, skip_a: bool = False, skip_b: bool = False) -> str:
    """A test module with two tests, either of them marked skipped."""
    a = "@pytest.mark.skip\n" if skip_a else ""
    b = "@pytest.mark.skip\n" if skip_b else ""
    return f"import pytest\n\n{a}def test_a():\n    pass\n\n{b}def test_b():\n    pass\n"


def test_removed_and_merely_moved_markers_are_not_reported(git_repo: Path) -> None:
    path = git_repo / "test_calc.py"
    path.write_text(_module(skip_a=True))
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "tests")
    base = git(git_repo, "rev-parse", "HEAD").strip()
    repo = Repo(git_repo)
    # The marker moves from test_a to test_b: no test lost its checks.
    path.write_text(_module(skip_b=True))
    assert find_skip_markers(repo.diff(base, set())) == []
    path.write_text(_module())
    assert find_skip_markers(repo.diff(base, set())) == []


def test_added_lines_that_look_like_headers_do_not_confuse_the_parser() -> None:
    diff = _new_file_diff("src/notes.txt", ["++ b/elsewhere.py", "-- a/x", "xit('oops')"])
    assert find_skip_markers(diff) == ["src/notes.txt:3: xit('oops')"]


def test_markers_in_plain_unified_diffs_are_found() -> None:
    diff = (
        "--- calc_test.go.orig\n+++ calc_test.go\n@@ -1,3 +1,4 @@\n"
        " func TestAdd(t *testing.T) {\n+\tt.Skip()\n \tcheck(t)\n }\n"
    )
    assert find_skip_markers(diff) == ["calc_test.go:2: t.Skip()"]


def test_a_rust_ignore_inside_a_source_file_is_found() -> None:
    diff = _new_file_diff("src/lib.rs", ["#[cfg(test)]", "mod tests {", "    #[test]", "    #[ignore]"])
    assert find_skip_markers(diff) == ["src/lib.rs:4: #[ignore]"]


def test_deleted_and_created_paths_come_from_the_diff_headers(git_repo: Path) -> None:
    (git_repo / "old_test.go").write_text("package x\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "go")
    base = git(git_repo, "rev-parse", "HEAD").strip()
    (git_repo / "old_test.go").unlink()
    (git_repo / "new_test.go").write_text("package x\n")
    diff = Repo(git_repo).diff(base, set())
    assert deleted_paths(diff) == {"old_test.go"}
    assert created_paths(diff) == {"new_test.go"}


# --- the verdict ---------------------------------------------------------------------------------


@pytest.fixture
def project(git_repo: Path) -> Path:
    """A small Python project: code in calc.py, its tests in tests/."""
    (git_repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (git_repo / "tests").mkdir()
    (git_repo / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n"
    )
    (git_repo / "tests" / "test_more.py").write_text("def test_more():\n    assert True\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "project")
    return git_repo


def _judge(root: Path, *, about_tests: bool = False) -> IntegrityResult | None:
    repo = Repo(root)
    base = git(root, "rev-parse", "HEAD").strip()
    return check_integrity(
        repo.changed_files(base, set()), (), repo.diff(base, set()), about_tests=about_tests
    )


def test_an_attempt_that_fixes_the_code_passes_the_guard(project: Path) -> None:
    (project / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    assert _judge(project) is None


def test_editing_the_failing_test_is_refused_with_a_reason_for_the_retry(project: Path) -> None:
    (project / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 0\n"
    )
    result = _judge(project)
    assert result is not None
    assert result.ok is False
    assert result.reason == f"the attempt edited test files (tests/test_calc.py){REMEDY}"
    assert result.paths == ["tests/test_calc.py"]
    assert result.markers == []


def test_deleting_a_test_is_refused_whether_known_from_the_caller_or_the_diff(project: Path) -> None:
    (project / "tests" / "test_calc.py").unlink()
    result = _judge(project)
    assert result is not None
    assert result.reason == f"the attempt deleted test files (tests/test_calc.py){REMEDY}"
    told = check_integrity(["tests/test_calc.py"], {"tests/test_calc.py"}, "")
    assert told is not None and told.reason == result.reason


def test_skipping_a_test_is_refused_and_the_marker_is_named(project: Path) -> None:
    (project / "tests" / "test_calc.py").write_text(
        "import pytest\nfrom calc import add\n\n\n@pytest.mark.xfail\ndef test_add():\n"
        "    assert add(2, 2) == 4\n"
    )
    result = _judge(project)
    assert result is not None
    assert result.reason == (
        "the attempt edited test files (tests/test_calc.py) and added skip markers "
        f"(tests/test_calc.py:5){REMEDY}"
    )
    assert result.markers == ["tests/test_calc.py:5: @pytest.mark.xfail"]


def test_every_kind_of_tampering_is_named_in_one_sentence(project: Path) -> None:
    (project / "tests" / "test_more.py").unlink()
    (project / "tests" / "test_calc.py").write_text("def test_add():\n    pass\n")
    (project / "calc.py").write_text("import pytest\npytest.skip('no', allow_module_level=True)\n")
    result = _judge(project)
    assert result is not None
    assert result.reason == (
        "the attempt edited test files (tests/test_calc.py), deleted test files "
        f"(tests/test_more.py) and added skip markers (calc.py:2){REMEDY}"
    )
    assert result.paths == ["tests/test_calc.py", "tests/test_more.py"]


def test_adding_a_new_test_file_is_allowed_but_a_new_conftest_is_not(project: Path) -> None:
    (project / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (project / "tests" / "test_regression.py").write_text("def test_neg():\n    assert True\n")
    assert _judge(project) is None
    (project / "tests" / "conftest.py").write_text("collect_ignore = ['test_calc.py']\n")
    result = _judge(project)
    assert result is not None and result.paths == ["tests/conftest.py"]


def test_without_a_diff_a_changed_test_file_counts_as_edited() -> None:
    result = check_integrity(["src/app.ts", "src/app.test.ts"], [], "")
    assert result is not None and result.paths == ["src/app.test.ts"]


def test_a_subtask_about_tests_may_edit_delete_and_skip_tests(project: Path) -> None:
    (project / "tests" / "test_more.py").unlink()
    (project / "tests" / "test_calc.py").write_text(
        "import pytest\n\n@pytest.mark.skip\ndef test_add():\n    pass\n"
    )
    assert _judge(project, about_tests=True) is None


def test_long_lists_are_cut_short_in_the_reason() -> None:
    changed = [f"tests/test_{i}.py" for i in range(5)]
    result = check_integrity(changed, [], "")
    assert result is not None
    assert result.reason == (
        "the attempt edited test files (tests/test_0.py, tests/test_1.py, tests/test_2.py "
        f"and 2 more){REMEDY}"
    )
    assert len(result.paths) == 5


def test_custom_globs_decide_what_counts_as_a_test() -> None:
    assert check_integrity(["tests/test_calc.py"], [], "", globs=["checks/**"]) is None
    result = check_integrity(["checks/calc.py"], [], "", globs=["checks/**"])
    assert result is not None and result.paths == ["checks/calc.py"]
