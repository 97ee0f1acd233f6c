"""Git worktrees for parallel tasks: one worktree per worker, reused task after task.

A worker's worktree is `worktrees/<name>` in the project's own folder outside the repository
(`orchestrator.private_home`): test discovery in the main tree never wanders into it, and
an agent, whose sandbox lets it write the system's temporary folder, cannot reach another
worker's. It is on a detached HEAD. Before each task it is reset to the base branch's tip (`reset --hard`, `clean`),
which costs less than a worktree added and removed per task and needs no lock on the
main checkout. When a task closes, its commits are put on the base branch's tip (a task's
one commit made again there by git's merge of trees, more than one rebased) and
fast-forwarded into it; a conflict keeps them on branch `goldenloop/<taskId>` for a human.
The worktrees are removed when the run ends, however it ends.

What a build needs but git does not carry (`worktree.link`, `worktree.copy`: a `.venv`,
`node_modules`, `.env` files) is linked or copied into each worktree after it is added
and after each reset, which removes it with everything untracked. Only paths git ignores
in the repository are provided: anything else would look like the attempt's own change.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.git.provided import Provided
from orchestrator.git.repo import NO_HOOKS, GitPlumbing, ReplayConflict
from orchestrator.private_home import project_home

BRANCH_PREFIX = "goldenloop/"


class MergeConflict(Exception):
    """The task's commits do not apply on the base branch; they are kept on a branch."""


class NotLanded(MergeConflict):
    """The commits apply, but the user's checkout cannot take them now (a file of theirs is
    in the way); they are kept on a branch, and the sentence says how to land them."""


class GitFailed(Exception):
    """A git command exited non-zero; `stderr` says why."""

    def __init__(self, args: Sequence[str], stderr: str) -> None:
        super().__init__(f"git {args[0]} failed: {_last_line(stderr)}")
        self.stderr = stderr


def _run(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # English messages: the last line of a failure is quoted to the user.
    return subprocess.run(["git", *NO_HOOKS, *args], cwd=cwd, env={**os.environ, "LC_ALL": "C", "LANGUAGE": "C"},
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)


def safe_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


@dataclass(frozen=True)
class Landing:
    """A task's commits made again on top of the base branch's tip, not merged yet."""

    head: str
    commits: list[str]
    tip: str  # the base branch's tip they are on
    moved: bool  # the tip is not where the task started: the combination is unchecked


@dataclass
class Worktree:
    path: Path
    base: str  # the commit the task in it started from
    task_id: str = ""
    fresh: bool = True  # just added: already at `base`, nothing to reset
    refs: GitPlumbing | None = field(default=None, repr=False, compare=False)  # reads its HEAD

    @property
    def branch(self) -> str:
        """Where the task's commits are kept when they conflict."""
        return BRANCH_PREFIX + safe_name(self.task_id)


class Worktrees:
    def __init__(self, root: Path, *, link: Sequence[str] = (), copy: Sequence[str] = ()) -> None:
        self.root = root
        self.link, self.copy = tuple(link), tuple(copy)
        self.home = project_home(root, make=False) / "worktrees"
        self._refs: GitPlumbing | None = None
        self._provided: Provided | None = None  # looked for once a run

    def _git(self, *args: str, cwd: Path | None = None) -> str:
        done = _run(args, cwd or self.root)
        if done.returncode != 0:
            raise GitFailed(args, done.stderr)
        return done.stdout.removesuffix("\n")

    def _try(self, *args: str) -> bool:
        """A clean-up step: its failure (nothing to remove) is not an error."""
        return _run(args, self.root).returncode == 0

    def head(self) -> str:
        """The base branch's tip, read from the refs files (no git process)."""
        return self._main().head()

    def _main(self) -> GitPlumbing:
        if self._refs is None:
            self._refs = GitPlumbing(self.root)
        return self._refs

    @staticmethod
    def _tree_head(tree: Worktree) -> str:
        if tree.refs is None:
            tree.refs = GitPlumbing(tree.path)
        return tree.refs.head()

    def add(self, name: str) -> Worktree:
        """A worktree for one worker, at the base branch's tip. On the main checkout's lock."""
        path = self.home / safe_name(name)
        if path.exists():
            self._remove_path(path)
        base = self.head()
        project_home(self.root)  # readable by you alone
        self.home.mkdir(exist_ok=True)
        # --force: a registered worktree whose folder is gone (a crash) is taken over.
        self._git("worktree", "add", "--force", "--quiet", "--detach", str(path), base)
        tree = Worktree(path, base)
        self.provide(tree)
        return tree

    def provide(self, tree: Worktree) -> None:
        """Link and copy the configured ignored paths of the repository into `tree`."""
        if self._provided is None:
            self._provided = Provided.of(self.root, self.link, self.copy)
        self._provided.into(tree.path)

    def start(self, tree: Worktree, task_id: str, base: str) -> None:
        """Make `tree` what a fresh worktree at `base` would be, for `task_id`: whatever
        the last task left (commits, edits, untracked and ignored files) goes. Touches
        only the worktree (its own HEAD and index), so it needs no lock."""
        tree.task_id = task_id
        if tree.fresh and tree.base == base:
            tree.fresh = False
            return
        tree.fresh = False
        self._git("reset", "--quiet", "--hard", base, cwd=tree.path)
        self._git("clean", "-ffdxq", cwd=tree.path)
        tree.base = base
        self.provide(tree)

    def integrate(self, tree: Worktree, before_merge: Callable[[list[str]], object] | None = None) -> list[str]:
        """Bring the task's commits (on the worktree's HEAD) onto the base branch; returns
        their shas there, which `before_merge` is given first. On the main checkout's lock."""
        landed = self.land(tree, self.onto_tip(tree), before_merge)
        assert landed is not None  # the lock is held throughout: the tip cannot move
        return landed

    def onto_tip(self, tree: Worktree) -> Landing:
        """The task's commits on top of the base branch's tip, not merged yet (on the main
        checkout's lock); MergeConflict when they do not apply there."""
        tip = self.head()
        head, commits = self._tree_head(tree), None
        if tip != tree.base:
            head, commits = self._onto(tree, tip, head)
        commits = commits or self._git("rev-list", "--reverse", f"{tip}..{head}").split()
        return Landing(head, commits, tip, moved=tip != tree.base)

    def land(self, tree: Worktree, landing: Landing,
             before_merge: Callable[[list[str]], object] | None = None) -> list[str] | None:
        """Fast-forward the base branch to `landing` (on the main checkout's lock); None,
        and nothing done, when its tip has moved on since `onto_tip`."""
        if self.head() != landing.tip:
            return None
        if before_merge is not None:
            before_merge(landing.commits)
        try:
            self._git("merge", "--ff-only", "--quiet", landing.head)
        except GitFailed as exc:
            self.keep(tree, landing.head)
            raise NotLanded(_not_landed(tree.branch, exc.stderr)) from None
        tree.base = landing.head  # the next task starts from here unless the base moves on
        return landing.commits

    def check_out(self, tree: Worktree, commit: str) -> None:
        """The worktree at `commit`: the task's commits as they would land, to be checked."""
        self._git("reset", "--hard", "--quiet", commit, cwd=tree.path)

    def keep(self, tree: Worktree, commit: str) -> None:
        """The task's commits, up to `commit` (a sha, or the worktree's HEAD), kept on its
        branch for a human: they did not land."""
        self._git("branch", "--force", tree.branch, commit, cwd=tree.path)

    def _onto(self, tree: Worktree, tip: str, head: str) -> tuple[str, list[str] | None]:
        """The task's commits moved on top of `tip`: (the new head, [it] when one commit was
        replayed). A task's one commit is made again there without touching the worktree,
        which the next task resets anyway (`GitPlumbing.replay`: a fifth of a rebase's cost, on the
        main checkout's lock); anything else is rebased in the worktree."""
        try:
            replayed = self._main().replay(head, tip)
        except ReplayConflict as exc:
            self.keep(tree, "HEAD")
            raise MergeConflict(self._conflicting(tree, str(exc))) from None
        if replayed is not None:
            return replayed, [replayed]
        try:
            self._git("rebase", "--quiet", tip, cwd=tree.path)
        except GitFailed as exc:
            self._try_in(tree.path, "rebase", "--abort")
            self.keep(tree, "HEAD")
            raise MergeConflict(self._conflicting(tree, _last_line(exc.stderr))) from None
        return self._tree_head(tree), None

    def _conflicting(self, tree: Worktree, detail: str) -> str:
        return (f"its commits conflict with {self.branch_name()}; they are kept on branch "
                f"{tree.branch} for a human to merge ({detail})")

    @staticmethod
    def _try_in(cwd: Path, *args: str) -> None:
        _run(args, cwd)

    def branch_name(self) -> str:
        return self._git("rev-parse", "--abbrev-ref", "HEAD")

    def remove(self, tree: Worktree) -> None:
        self._remove_path(tree.path)
        with contextlib.suppress(OSError):  # the last one out leaves no folder in the temp dir
            self.home.rmdir()

    def _remove_path(self, path: Path) -> None:
        if self._try("worktree", "remove", "--force", str(path)) and not path.exists():
            return
        shutil.rmtree(path, ignore_errors=True)
        self._try("worktree", "prune")

    def clean_stale(self, keep_branches: set[str]) -> list[str]:
        """Remove worktrees a crashed run left behind, and their branches unless kept."""
        removed = []
        listed = self._git("worktree", "list", "--porcelain")
        for block in listed.split("\n\n"):
            fields = dict(line.split(" ", 1) for line in block.splitlines() if " " in line)
            path = Path(fields.get("worktree", ""))
            if self.home not in path.parents:
                continue
            self._remove_path(path)
            branch = fields.get("branch", "").removeprefix("refs/heads/")
            if branch and branch not in keep_branches:
                self._try("branch", "-D", branch)
            removed.append(str(path))
        return removed


def _not_landed(branch: str, stderr: str) -> str:
    """Why a fast-forward of the checkout failed, and what the user does next. git refuses
    to overwrite a file the user changed or created, and changes nothing then: their work
    stays as it is, and the task's commits wait on their branch."""
    yours = _files_after(stderr, "Your local changes to the following files would be overwritten")
    untracked = _files_after(stderr, "The following untracked working tree files would be overwritten")
    merge = f"`git cherry-pick HEAD..{branch}`"  # the run's bookkeeping commit may follow: no fast-forward
    if yours:
        return (f"your uncommitted change to {_some(yours)} is in the way of the task's commits, which are kept on "
                f"branch {branch}: `git stash`, then {merge}, then `git stash pop` brings your change back on top")
    if untracked:
        return (f"your untracked file {_some(untracked)} is in the way of the task's commits, which are kept on "
                f"branch {branch}: move it away, then {merge}")
    return (f"your branch could not be fast-forwarded ({_last_line(stderr)}); the task's commits are kept on "
            f"branch {branch}: {merge} lands them")


def _files_after(stderr: str, heading: str) -> list[str]:
    """The tab-indented paths git lists under `heading`."""
    lines = stderr.splitlines()
    start = next((i for i, line in enumerate(lines) if heading in line), None)
    if start is None:
        return []
    found = []
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        found.append(line.strip())
    return found


def _some(paths: list[str]) -> str:
    return paths[0] + (f" (and {len(paths) - 1} more)" if len(paths) > 1 else "")


def _last_line(text: object) -> str:
    lines = str(text or "").strip().splitlines()
    return lines[-1] if lines else "no detail"
