"""Repo: what an attempt changed, its diff, exact commits, restore and snapshots."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from projects import git

from orchestrator.git.repo import FALLBACK_EMAIL, FALLBACK_NAME, ReplayConflict, Repo, RepoError, tree_patch


@pytest.fixture
def project(git_repo: Path) -> Path:
    """A repository with tracked sources, an ignore file and a committed .openagents/."""
    (git_repo / "src").mkdir()
    (git_repo / "src" / "app.py").write_text("def answer():\n    return 41\n")
    (git_repo / "src" / "old.py").write_text("OLD = True\n")
    (git_repo / ".gitignore").write_text("*.log\n")
    (git_repo / ".openagents").mkdir()
    (git_repo / ".openagents" / "tasks.jsonl").write_text('{"id": "t1"}\n')
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "sources")
    return git_repo


def _attempt(root: Path) -> None:
    """What a typical attempt does: edit, delete, create in a new folder, touch memory."""
    (root / "src" / "app.py").write_text("def answer():\n    return 42\n")
    (root / "src" / "old.py").unlink()
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "sub" / "new.py").write_text("NEW = 1\n")
    (root / ".openagents" / "tasks.jsonl").write_text('{"id": "t1", "status": "closed"}\n')
    (root / ".openagents" / "run.jsonl").write_text("{}\n")


def test_not_a_repository_is_one_clear_sentence(tmp_path: Path) -> None:
    with pytest.raises(RepoError, match=r"is not a git repository$"):
        Repo(tmp_path)


def test_repository_without_commits_is_refused_with_advice(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    with pytest.raises(RepoError, match="no commits yet.*make a first commit"):
        Repo(tmp_path)


def test_opens_from_a_subfolder_and_reports_head_and_branch(project: Path) -> None:
    repo = Repo(project / "src")
    assert repo.root == project
    assert repo.head() == git(project, "rev-parse", "HEAD").strip()
    assert repo.branch() == "main"
    git(project, "checkout", "-q", "--detach")
    assert repo.branch() is None


def test_dirty_paths_lists_user_work_but_not_ignored_or_openagents(project: Path) -> None:
    repo = Repo(project)
    assert repo.dirty_paths() == []
    (project / "src" / "app.py").write_text("changed\n")
    (project / "notes.txt").write_text("mine\n")
    (project / "debug.log").write_text("ignored\n")
    (project / ".openagents" / "tasks.jsonl").write_text("{}\n")
    (project / "src" / "old.py").unlink()
    (project / "staged.py").write_text("x = 1\n")
    git(project, "add", "staged.py")
    assert repo.dirty_paths() == ["notes.txt", "src/app.py", "src/old.py", "staged.py"]


def test_changed_files_ignores_untracked_files_that_were_there_before(project: Path) -> None:
    (project / "notes.txt").write_text("user's scratch file\n")
    repo = Repo(project)
    base, before = repo.head(), repo.untracked()
    assert before == {"notes.txt"}
    _attempt(project)
    (project / "notes.txt").write_text("still the user's\n")
    assert repo.changed_files(base, before) == ["pkg/sub/new.py", "src/app.py", "src/old.py"]


def test_changed_files_rejects_an_unknown_base(project: Path) -> None:
    with pytest.raises(RepoError, match="is not a commit"):
        Repo(project).changed_files("no-such-commit", set())


def test_diff_shows_edits_deletions_and_new_files_in_full(project: Path) -> None:
    repo = Repo(project)
    base, before = repo.head(), repo.untracked()
    staged_before = git(project, "diff", "--cached", "--name-only")
    _attempt(project)
    diff = repo.diff(base, before)
    assert "-    return 41\n+    return 42\n" in diff
    assert "deleted file mode" in diff and "-OLD = True" in diff
    assert "diff --git a/pkg/sub/new.py b/pkg/sub/new.py\nnew file mode" in diff
    assert "+NEW = 1" in diff
    assert ".openagents" not in diff
    # the user's index is untouched: the new file is not even intent-to-add there
    assert git(project, "diff", "--cached", "--name-only") == staged_before
    assert "pkg/sub/new.py" in repo.untracked()


def test_diff_is_cut_at_max_bytes_with_a_marker(project: Path) -> None:
    repo = Repo(project)
    base, before = repo.head(), repo.untracked()
    (project / "big.txt").write_text("".join(f"line {i}\n" for i in range(5000)))
    diff = repo.diff(base, before, max_bytes=2000)
    assert diff.startswith("diff --git a/big.txt b/big.txt")
    assert "[... diff truncated: 2000 of" in diff
    assert len(diff.encode()) < 2200
    assert repo.diff(base, before, max_bytes=None).endswith("+line 4999\n")


def test_no_changes_give_an_empty_diff(project: Path) -> None:
    repo = Repo(project)
    assert repo.diff(repo.head(), repo.untracked()) == ""
    assert repo.snapshot(repo.head(), repo.untracked()) == ""


def test_commit_takes_exactly_the_given_paths(project: Path) -> None:
    repo = Repo(project)
    base, before = repo.head(), repo.untracked()
    (project / "README.md").write_text("# user's staged edit\n")  # not the attempt's
    git(project, "add", "README.md")
    _attempt(project)
    attempt_paths = ["pkg/sub/new.py", "src/app.py", "src/old.py"]
    assert repo.changed_files(base, before) == ["README.md", *attempt_paths]

    sha = repo.commit(attempt_paths, "t1: answer 42")

    assert sha == repo.head() != base
    assert git(project, "log", "-1", "--format=%s") == "t1: answer 42\n"
    committed = git(project, "show", "--name-status", "--format=", sha).split("\n")
    assert sorted(filter(None, committed)) == [
        "A\tpkg/sub/new.py",
        "D\tsrc/old.py",
        "M\tsrc/app.py",
    ]
    # the user's staged change is still staged and was not committed
    assert git(project, "diff", "--cached", "--name-only") == "README.md\n"
    assert git(project, "show", f"{sha}:README.md") == "# sample\n"
    # the committed paths are clean; .openagents changes were not committed
    assert repo.dirty_paths() == ["README.md"]
    assert repo.changed_files(sha, repo.untracked()) == ["README.md"]
    assert "closed" not in git(project, "show", f"{sha}:.openagents/tasks.jsonl")


@pytest.mark.parametrize("staged_since", [False, True])
def test_a_commit_after_a_status_that_saw_nothing_staged_asks_git_again_only_if_the_index_changed(
    project: Path, monkeypatch: pytest.MonkeyPatch, staged_since: bool
) -> None:
    """The status that listed the attempt's files saw nothing staged: the commit trusts it
    (no `diff-index`) while the index file is that very file. Staged since, it asks again,
    and what the user staged is still never committed."""
    repo = Repo(project)
    base, before = repo.head(), repo.untracked()
    _attempt(project)
    attempt_paths = repo.changed_files(base, before)
    if staged_since:  # while the checks ran, say
        (project / "README.md").write_text("# user's staged edit\n")
        git(project, "add", "README.md")
    asked: list[str] = []
    run = repo._git
    monkeypatch.setattr(repo, "_git", lambda *args, **kw: asked.append(args[0]) or run(*args, **kw))

    sha = repo.commit(attempt_paths, "t1: answer 42")

    assert ("diff-index" in asked) is staged_since
    committed = git(project, "show", "--name-only", "--format=", sha).split()
    assert sorted(committed) == ["pkg/sub/new.py", "src/app.py", "src/old.py"]
    assert git(project, "diff", "--cached", "--name-only") == ("README.md\n" if staged_since else "")


def test_the_users_index_after_a_commit_is_the_committed_tree_and_the_next_commit_trusts_it(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit whose scratch index copies the user's (nothing else staged) hands that
    index over as git would: the user sees a clean index, and the next commit, with no
    `status` between (the task's bookkeeping), needs no `diff-index` or `update-index`."""
    repo = Repo(project)
    base, before = repo.head(), repo.untracked()
    _attempt(project)
    repo.commit(repo.changed_files(base, before), "t1: answer 42")
    (project / "notes.txt").write_text("bookkeeping\n")
    asked: list[str] = []
    run = repo._git
    monkeypatch.setattr(repo, "_git", lambda *args, **kw: asked.append(args[0]) or run(*args, **kw))

    sha = repo.commit(["notes.txt"], "t1: bookkeeping")

    assert asked == ["update-index", "write-tree", "commit-tree", "update-ref"]
    assert git(project, "diff", "--cached", "--name-only") == ""  # nothing staged that HEAD lacks
    assert repo.dirty_paths() == []
    staged = git(project, "ls-files", "--stage", "notes.txt").split()[1]
    assert staged == git(project, "rev-parse", f"{sha}:notes.txt").strip()


def test_what_the_user_stages_while_a_commit_is_made_stays_staged_and_uncommitted(project: Path) -> None:
    repo = Repo(project)
    base, before = repo.head(), repo.untracked()
    _attempt(project)
    paths = repo.changed_files(base, before)

    def user_stages(old: str, new: str) -> None:  # after the commit object, before the index is handed over
        (project / "README.md").write_text("# staged by the user meanwhile\n")
        git(project, "add", "README.md")

    sha = repo.commit(paths, "t1: answer 42", before_ref=user_stages)

    assert git(project, "diff", "--cached", "--name-only") == "README.md\n"
    assert git(project, "show", f"{sha}:README.md") == "# sample\n"
    assert git(project, "diff", "--cached", "--name-only", "--", *paths) == ""  # the commit's own entries


def test_the_index_handed_over_keeps_its_rights_and_a_killed_runs_leftover_goes(project: Path) -> None:
    """A shared repository's index is group-writable: the new one must be too. An index a
    run killed in the moment of the hand-over left in the git folder is removed."""
    repo = Repo(project)
    index = project / ".git" / "index"
    index.chmod(0o664)
    leftover = project / ".git" / "goldenloop-index-999999999.1-staged"  # no such process
    leftover.write_bytes(b"half an index")
    base, before = repo.head(), repo.untracked()
    _attempt(project)

    repo.commit(repo.changed_files(base, before), "t1: answer 42")

    assert git(project, "diff", "--cached", "--name-only") == ""
    assert index.stat().st_mode & 0o777 == 0o664
    assert not leftover.exists()
    assert not [p.name for p in (project / ".git").iterdir() if p.name.startswith(("goldenloop-", "index.lock"))]


def test_an_edit_in_the_second_the_index_was_written_is_still_committed(project: Path) -> None:
    # The scratch index is a copy of the user's. Git trusts an entry's stat data only when
    # the file is older than the index file; a copy stamped "now" would make it trust an
    # entry written in the same second as the file, and the edit below would be missed.
    repo = Repo(project)
    app, index = project / "src" / "app.py", project / ".git" / "index"
    then = time.time() - 100
    os.utime(app, (then, then))
    git(project, "update-index", "--refresh")  # the entry records that mtime
    os.utime(index, (then, then))  # ... and the index was written in that same second
    app.write_text("def answer():\n    return 43\n")  # same size, same second
    os.utime(app, (then, then))
    sha = repo.commit(["src/app.py"], "t1: answer 43")
    assert "return 43" in git(project, "show", f"{sha}:src/app.py")
    assert repo.dirty_paths() == []


def test_commit_reads_the_tree_of_a_packed_head(project: Path) -> None:
    git(project, "gc", "-q")  # HEAD's commit object now lives in a pack, not a loose file
    repo = Repo(project)
    with pytest.raises(RepoError, match="nothing to commit"):
        repo.commit(["src/app.py"], "no-op")
    (project / "src" / "app.py").write_text("changed\n")
    assert repo.commit(["src/app.py"], "t1: change") == repo.head()


def test_commit_without_changes_is_refused(project: Path) -> None:
    repo = Repo(project)
    with pytest.raises(RepoError, match="nothing to commit"):
        repo.commit(["src/app.py"], "no-op")
    with pytest.raises(RepoError, match="nothing to commit"):
        repo.commit([], "no-op")


def test_commit_uses_a_fallback_identity_when_git_has_none(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "gitconfig").write_text("")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME",
                "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(var, raising=False)
    git(project, "config", "--unset", "user.name")
    git(project, "config", "--unset", "user.email")
    # without this, git might guess user@hostname instead of failing
    git(project, "config", "user.useConfigOnly", "true")
    (project / "src" / "app.py").write_text("changed\n")

    sha = Repo(project).commit(["src/app.py"], "t2: change")

    author = git(project, "log", "-1", "--format=%an <%ae>|%cn <%ce>", sha).strip()
    expected = f"{FALLBACK_NAME} <{FALLBACK_EMAIL}>"
    assert author == f"{expected}|{expected}"


def test_commit_keeps_a_configured_identity(project: Path) -> None:
    (project / "src" / "app.py").write_text("changed\n")
    sha = Repo(project).commit(["src/app.py"], "t3: change")
    assert git(project, "log", "-1", "--format=%an", sha) == "goldenloop tests\n"


def test_restore_puts_the_tree_back_and_leaves_user_files_alone(project: Path) -> None:
    (project / "notes.txt").write_text("user's scratch file\n")
    (project / "debug.log").write_text("ignored build output\n")
    repo = Repo(project)
    base, before = repo.head(), repo.untracked()
    _attempt(project)
    (project / "src" / "extra.py").write_text("x = 2\n")
    (project / "staged_new.py").write_text("y = 3\n")
    git(project, "add", "staged_new.py")  # an agent that stages its own work

    restored = repo.restore(base, before)

    assert restored == [
        "pkg/sub/new.py",
        "src/app.py",
        "src/extra.py",
        "src/old.py",
        "staged_new.py",
    ]
    assert (project / "src" / "app.py").read_text() == "def answer():\n    return 41\n"
    assert (project / "src" / "old.py").read_text() == "OLD = True\n"
    assert not (project / "src" / "extra.py").exists()
    assert not (project / "staged_new.py").exists()
    assert not (project / "pkg").exists()  # created folders are gone too
    assert (project / "src").is_dir()
    assert (project / "notes.txt").read_text() == "user's scratch file\n"
    assert (project / "debug.log").exists()
    assert (project / ".openagents" / "run.jsonl").exists()
    assert "closed" in (project / ".openagents" / "tasks.jsonl").read_text()
    assert repo.head() == base
    assert repo.changed_files(base, before) == []
    assert repo.dirty_paths() == ["notes.txt"]


def test_a_file_the_user_modified_before_is_never_committed_or_restored(project: Path) -> None:
    (project / "src" / "app.py").write_text("def answer():\n    return 40  # user's edit\n")
    repo = Repo(project)
    base, before = repo.head(), set(repo.dirty_paths())
    (project / "src" / "old.py").write_text("OLD = False\n")  # the attempt's edit

    assert repo.changed_files(base, before) == ["src/old.py"]
    repo.commit(repo.changed_files(base, before), "T-1: flip OLD")
    (project / "src" / "new.py").write_text("N = 1\n")
    repo.restore(repo.head(), before)

    assert "user's edit" in (project / "src" / "app.py").read_text()
    assert git(project, "show", "--name-only", "--format=", "HEAD").split() == ["src/old.py"]
    assert not (project / "src" / "new.py").exists()


def test_snapshot_round_trip_brings_an_attempt_back(project: Path) -> None:
    repo = Repo(project)
    base, before = repo.head(), repo.untracked()
    _attempt(project)
    (project / "logo.bin").write_bytes(bytes(range(256)) * 4)
    (project / "empty.txt").write_text("")
    expected = {p: (project / p).read_bytes() for p in ("src/app.py", "pkg/sub/new.py", "logo.bin")}
    changed = repo.changed_files(base, before)

    patch = repo.snapshot(base, before)
    repo.restore(base, before)
    assert repo.changed_files(base, before) == []
    repo.apply_snapshot(patch)

    assert repo.changed_files(base, before) == changed
    assert {p: (project / p).read_bytes() for p in expected} == expected
    assert not (project / "src" / "old.py").exists()
    assert (project / "empty.txt").read_text() == ""


def test_a_judged_tree_s_patch_is_the_snapshot_of_what_its_commit_holds(project: Path) -> None:
    """A passing attempt's patch comes from the tree it was judged on: two trees compared,
    the same changes a snapshot of its files gives, and they bring the attempt back."""
    repo = Repo(project)
    base, before = repo.head(), repo.untracked()
    _attempt(project)
    (project / "logo.bin").write_bytes(bytes(range(256)) * 4)
    changed = repo.changed_files(base, before)
    expected = {p: (project / p).read_bytes() for p in ("src/app.py", "pkg/sub/new.py", "logo.bin")}

    patch = tree_patch(repo, base, repo.tree_with(changed), changed)
    assert "deleted file mode" in patch and "GIT binary patch" in patch and "+NEW = 1" in patch
    repo.restore(base, before)
    repo.apply_snapshot(patch)

    assert repo.changed_files(base, before) == changed
    assert {p: (project / p).read_bytes() for p in expected} == expected
    assert not (project / "src" / "old.py").exists()
    assert tree_patch(repo, base, repo.tree_with([]), []) == ""


def test_a_snapshot_never_holds_what_the_user_staged_and_round_trips_whatever_the_index_says(project: Path) -> None:
    """The patch is a diff of the base against the working tree on a copy of the user's
    index: what is staged there (the user's work, an agent's `git add` or `git rm --cached`)
    changes nothing in it, and a given list of paths is all it holds."""
    repo = Repo(project)
    (project / "mine.txt").write_text("my staged work\n")
    git(project, "add", "mine.txt")
    base, before = repo.head(), set(repo.dirty_paths())
    _attempt(project)
    git(project, "add", "pkg/sub/new.py")  # the agent staged its new file
    git(project, "rm", "-q", "--cached", "src/app.py")  # and took an edited one out of the index
    expected = {p: (project / p).read_bytes() for p in ("src/app.py", "pkg/sub/new.py")}

    patch = repo.snapshot(base, before)
    assert "mine.txt" not in patch
    assert "+NEW = 1" in patch and "+    return 42" in patch and "deleted file mode" in patch
    assert repo.snapshot(base, before, ["pkg/sub/new.py"]) == patch[patch.index("diff --git a/pkg/sub/new.py"):
                                                                     patch.index("diff --git a/src/app.py")]
    git(project, "reset", "-q", "--", "pkg/sub/new.py", "src/app.py")
    repo.restore(base, before)
    repo.apply_snapshot(patch)
    assert {p: (project / p).read_bytes() for p in expected} == expected
    assert not (project / "src" / "old.py").exists()
    assert git(project, "diff", "--cached", "--name-only").split() == ["mine.txt"]  # still staged, untouched


def test_a_snapshot_that_does_not_apply_is_a_clear_error(project: Path) -> None:
    repo = Repo(project)
    base, before = repo.head(), repo.untracked()
    (project / "src" / "app.py").write_text("def answer():\n    return 42\n")
    patch = repo.snapshot(base, before)
    (project / "src" / "app.py").write_text("something else entirely\n")
    with pytest.raises(RepoError, match="snapshot does not apply"):
        repo.apply_snapshot(patch)


def _task_commit(root: Path, base: str, name: str, text: str, message: str) -> str:
    """A commit of one file on top of `base`, by another author at another time, on no branch."""
    git(root, "checkout", "-q", "--detach", base)
    (root / name).write_text(text)
    git(root, "add", name)
    git(root, "-c", "user.name=Ada Lovelace", "-c", "user.email=ada@example.org", "commit", "-q",
        "--date=2026-01-02T03:04:05+0100", "-m", message)
    sha = git(root, "rev-parse", "HEAD").strip()
    git(root, "checkout", "-q", "-")
    return sha


def test_a_commit_made_again_on_a_moved_branch_is_what_a_rebase_makes_of_it(project: Path) -> None:
    base = git(project, "rev-parse", "HEAD").strip()
    task = _task_commit(project, base, "task.py", "x = 1\n", "T-1: a task\n\nWith a body,\n  kept as written.")
    (project / "other.py").write_text("y = 2\n")
    git(project, "add", "other.py")
    git(project, "commit", "-q", "-m", "another task landed first")
    tip = git(project, "rev-parse", "HEAD").strip()
    status_before = git(project, "status", "--porcelain")

    replayed = Repo(project).replay(task, tip)

    git(project, "checkout", "-q", "--detach", task)
    git(project, "rebase", "-q", tip)
    rebased = git(project, "rev-parse", "HEAD").strip()
    git(project, "checkout", "-q", "main")
    assert replayed is not None and replayed != task
    for what in ("%T", "%P", "%an <%ae> %ad", "%B"):  # tree, parent, author and date, message
        assert git(project, "show", "-s", f"--format={what}", replayed) == git(project, "show", "-s", f"--format={what}", rebased)
    assert git(project, "status", "--porcelain") == status_before  # no working tree or index was touched
    assert git(project, "rev-parse", "HEAD").strip() == tip


def test_a_conflicting_commit_is_not_made_again_and_what_a_rebase_must_do_is_left_to_it(project: Path) -> None:
    base = git(project, "rev-parse", "HEAD").strip()
    task = _task_commit(project, base, "src/app.py", "def answer():\n    return 43\n", "T-1: 43")
    (project / "src" / "app.py").write_text("def answer():\n    return 44\n")
    git(project, "commit", "-q", "-am", "44 landed first")
    tip = git(project, "rev-parse", "HEAD").strip()
    repo = Repo(project)
    with pytest.raises(ReplayConflict, match="src/app.py"):
        repo.replay(task, tip)
    git(project, "merge", "-q", "--no-edit", "--no-ff", _task_commit(project, tip, "n.py", "n = 1\n", "T-2"))
    merge = git(project, "rev-parse", "HEAD").strip()
    assert repo.replay(merge, tip) is None  # a merge: rebased instead
    assert repo.replay(task, task) is None  # already there: a rebase drops it
    assert repo.replay(task, base) == task  # on top of it already: a rebase leaves it as it is
    assert git(project, "rev-parse", "HEAD").strip() == merge


def test_head_is_read_from_packed_refs_and_from_a_worktree(tmp_path: Path) -> None:
    from projects import init_repo

    repo = init_repo(tmp_path / "repo")
    git(repo, "pack-refs", "--all")  # what `git gc` does to a busy repository's refs
    assert not (repo / ".git" / "refs" / "heads" / "main").exists()
    sha = git(repo, "rev-parse", "HEAD").strip()
    assert Repo(repo).head() == sha
    assert Repo(repo).branch() == "main"

    git(repo, "worktree", "add", "-q", "-b", "side", str(tmp_path / "side"))
    (tmp_path / "side" / "new.txt").write_text("x\n")
    git(tmp_path / "side", "add", "new.txt")
    git(tmp_path / "side", "commit", "-qm", "on the side")
    side = Repo(tmp_path / "side")
    assert side.head() == git(tmp_path / "side", "rev-parse", "HEAD").strip() != sha
    assert side.branch() == "side" and Repo(repo).head() == sha


def test_a_machine_without_git_gets_one_sentence(git_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(RepoError, match="git is not installed"):
        Repo(git_repo)
