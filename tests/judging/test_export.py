"""The judge's tree: exactly one tree object's files, made anew for every run of the checks,
importing the exported code whatever the project's environment points at."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
from projects import do_one_task, events_of, git, task, tasks_on_disk
from shop import make_shop, whole

from orchestrator.git.provided import Provided
from orchestrator.git.repo import Repo
from orchestrator.judging.export import JudgeTree


def files_of(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink()}


def test_a_checkout_holds_exactly_the_tree_whatever_the_last_run_left(git_repo: Path) -> None:
    repo = Repo(git_repo)
    (git_repo / "app.py").write_text("VALUE = 1\n")
    git(git_repo, "add", "app.py")
    git(git_repo, "commit", "-qm", "app")
    first = repo.tree_of("HEAD")
    (git_repo / "app.py").write_text("VALUE = 2\n")
    (git_repo / "extra.py").write_text("")
    second = repo.tree_with(["app.py", "extra.py"])
    judge = JudgeTree(repo)
    try:
        judge.check_out(second)
        assert (judge.path / "app.py").read_text() == "VALUE = 2\n" and (judge.path / "extra.py").exists()
        (judge.path / "app.py").write_text("VALUE = 99\n")  # a run writes into the tree
        (judge.path / "__pycache__").mkdir()
        (judge.path / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"stale")
        judge.check_out(first)
        assert files_of(judge.path) == {"README.md", "app.py"}
        assert (judge.path / "app.py").read_text() == "VALUE = 1\n"
    finally:
        judge.remove()
    assert not judge.home.exists()
    assert sorted(git(git_repo, "status", "--porcelain").splitlines()) == [" M app.py", "?? extra.py"]  # untouched


def test_only_ignored_paths_the_project_names_are_provided(git_repo: Path) -> None:
    (git_repo / ".gitignore").write_text(".venv/\n.env\nbuild/\n")
    git(git_repo, "add", ".gitignore")
    git(git_repo, "commit", "-qm", "ignore")
    (git_repo / ".venv").mkdir()
    (git_repo / ".venv" / "marker").write_text("")
    (git_repo / ".env").write_text("TOKEN=x\n")
    (git_repo / "build").mkdir()
    (git_repo / "notes.txt").write_text("untracked, not ignored\n")
    repo = Repo(git_repo)
    judge = JudgeTree(repo, Provided.of(git_repo, [".venv", "notes.txt"], [".env"]))
    try:
        judge.check_out(repo.tree_of("HEAD"))
        assert (judge.path / ".venv").is_symlink() and (judge.path / ".env").read_text() == "TOKEN=x\n"
        assert not (judge.path / "notes.txt").exists() and not (judge.path / "build").exists()
        judge.check_out(repo.tree_of("HEAD"))  # again: kept, not removed by the clean
        assert (judge.path / ".venv" / "marker").exists()
    finally:
        judge.remove()
    assert (git_repo / ".venv" / "marker").exists()  # a link removed, never what it points at


def _editable_venv(home: Path, source: Path) -> Path:
    """A real virtual environment with the package installed in editable mode the way
    setuptools and hatchling do it for a src layout (a .pth naming the checkout's src/),
    and this interpreter's own packages (pytest) reachable the same way."""
    venv.EnvBuilder(with_pip=False).create(home)
    python = home / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "__editable__.textkit-0.1.0.pth").write_text(f"{source}\n")
    (Path(purelib) / "test_tools.pth").write_text(f"{sysconfig.get_paths()['purelib']}\n")
    return python


STATS = 'def word_count(text):\n    return len(text.split(" "))\n'
STATS_TESTS = 'from textkit.stats import word_count\n\n\ndef test_collapses():\n    assert word_count("a  b") == 2\n'


@pytest.mark.skipif(sys.platform != "linux", reason="the venv layout of the test is Linux's")
def test_the_judge_imports_the_exported_code_not_an_editable_installs_checkout(git_repo: Path, tmp_path: Path) -> None:
    # The user's checkout holds an uncommitted fix; the editable install points at it. The
    # attempt fixes nothing: the judge must test what would be committed, and block the task.
    python = _editable_venv(tmp_path / "env", git_repo / "src")
    note = whole("src/textkit/__init__.py", '"""Small helpers for text."""\n', "A docstring first.")
    bug = task("T-1", "Fix word_count", description="word_count in src/textkit/stats.py miscounts double spaces.")
    repo = make_shop(git_repo, [{"match": "Task T-1", "reply": note}], tasks=[bug],
                     files={"src/textkit/__init__.py": "", "src/textkit/stats.py": STATS,
                            "tests/test_stats.py": STATS_TESTS},
                     config={"testCommands": [f"{python} -m pytest -q -p no:cacheprovider tests/test_stats.py"]})
    (repo / "src" / "textkit" / "stats.py").write_text(STATS.replace('split(" ")', "split()"))  # the user's own
    env_check = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_stats.py"],
                               cwd=repo, capture_output=True, text=True, env={**os.environ, "PATH": ""})
    assert env_check.returncode == 0  # in the checkout, the editable install finds the user's fixed copy

    assert do_one_task(repo, "--allow-dirty") == 1

    assert tasks_on_disk(repo)["T-1"]["status"] == "blocked"
    (verdict,) = events_of(repo, "verdict")
    assert verdict["parts"]["aboutFailing"] == ["tests/test_stats.py::test_collapses"]
    assert "split()" in (repo / "src" / "textkit" / "stats.py").read_text()  # the user's work untouched


def test_the_tree_judged_is_the_tree_a_commit_of_the_same_paths_records(git_repo: Path) -> None:
    # An edit, a new file, a deletion and a folder replaced by a link: what `commit` would hold.
    for name, text in {"keep.py": "A = 1\n", "gone.py": "B = 1\n", "pkg/mod.py": "C = 1\n"}.items():
        (git_repo / name).parent.mkdir(exist_ok=True)
        (git_repo / name).write_text(text)
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "files")
    (git_repo / "keep.py").write_text("A = 2\n")
    (git_repo / "new.py").write_text("D = 1\n")
    (git_repo / "gone.py").unlink()
    git(git_repo, "rm", "-rq", "pkg")
    (git_repo / "other").mkdir()
    (git_repo / "pkg").symlink_to("other")
    repo = Repo(git_repo)
    changed = repo.changed_files(repo.head(), set())

    judged = repo.tree_with(changed)

    listed = git(git_repo, "ls-tree", "-r", "--name-only", judged).split()
    assert listed == ["README.md", "keep.py", "new.py", "pkg"]  # pkg: the link itself
    sha = repo.commit(changed, "the same paths", judged=judged)
    assert git(git_repo, "rev-parse", f"{sha}^{{tree}}").strip() == judged
