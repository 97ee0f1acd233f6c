"""Git worktrees for parallel tasks: one worktree and branch per task, merged back.

A task runs in `<tmp>/goldenloop-worktrees/<repo>-<hash>/<taskId>` on branch
`goldenloop/<taskId>`, outside the repository so that test discovery in the main tree
never wanders into it. When the task closes, its commits are rebased onto the base
branch's tip and fast-forwarded into it; a conflict keeps the branch for a human.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import git
from git.exc import GitCommandError
from git.refs.symbolic import SymbolicReference

BRANCH_PREFIX = "goldenloop/"


class MergeConflict(Exception):
    """The task's commits do not apply on the base branch; the branch is kept."""


@dataclass(frozen=True)
class Worktree:
    task_id: str
    path: Path
    branch: str
    base: str  # the commit it started from


class Worktrees:
    def __init__(self, root: Path) -> None:
        self.root = root
        digest = hashlib.sha256(str(root).encode()).hexdigest()[:10]
        self.home = Path(tempfile.gettempdir()) / "goldenloop-worktrees" / f"{root.name}-{digest}"

    def _git(self, *args: str, cwd: Path | None = None) -> str:
        return str(git.Git(cwd or self.root).execute(["git", *args]))

    def _try(self, *args: str) -> bool:
        """A clean-up step: its failure (nothing to remove) is not an error."""
        status, _, _ = git.Git(self.root).execute(
            ["git", *args], with_exceptions=False, with_extended_output=True
        )
        return status == 0

    def _head(self) -> str:
        return SymbolicReference.dereference_recursive(git.Repo(self.root), "HEAD")  # no git process

    def add(self, task_id: str) -> Worktree:
        name = "".join(c if c.isalnum() or c in "-_." else "_" for c in task_id)
        path = self.home / name
        branch = BRANCH_PREFIX + name
        if path.exists():
            self._remove_path(path)
        base = self._head()
        self.home.mkdir(parents=True, exist_ok=True)
        # --force: a registered worktree whose folder is gone (a crash) is taken over.
        self._git("worktree", "add", "--force", "--quiet", "-B", branch, str(path), base)
        return Worktree(task_id, path, branch, base)

    def integrate(self, tree: Worktree) -> list[str]:
        """Bring the branch's commits onto the base branch; returns their new shas."""
        tip = self._head()
        if tip != tree.base:
            try:
                self._git("rebase", "--quiet", tip, cwd=tree.path)
            except GitCommandError as exc:
                self._git("rebase", "--abort", cwd=tree.path)
                raise MergeConflict(
                    f"its commits conflict with {self.branch_name()}; they are kept on branch "
                    f"{tree.branch} for a human to merge ({_last_line(exc.stderr)})"
                ) from None
        try:
            self._git("merge", "--ff-only", "--quiet", tree.branch)
        except GitCommandError as exc:
            raise MergeConflict(
                f"the base branch could not be fast-forwarded; the commits are kept on branch "
                f"{tree.branch} ({_last_line(exc.stderr)})"
            ) from None
        return self._git("rev-list", "--reverse", f"{tip}..HEAD").split()

    def branch_name(self) -> str:
        return self._git("rev-parse", "--abbrev-ref", "HEAD")

    def remove(self, tree: Worktree, *, keep_branch: bool = False) -> None:
        self._remove_path(tree.path)
        if not keep_branch:
            self._try("branch", "-D", tree.branch)
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


def _last_line(text: object) -> str:
    lines = str(text or "").strip().splitlines()
    return lines[-1] if lines else "no detail"
