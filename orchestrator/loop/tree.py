"""The working tree as one subtask sees it: its base commit, and what was there before.

The tree is a worktree of the task's own (orchestrator/batch/worktree.py): nothing in it
is the user's, so going back needs no copy of anything. Every git call runs off the event
loop, so parallel workers' checks keep running. The tree goes back in two ways only:
`restore` (to the base) and `apply` (an earlier attempt's patch, right after a restore).
Paths already changed or untracked when the subtask started (a library user's loop on a
checkout) are never counted, committed or restored.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from orchestrator.git.index_flags import hidden_from_status, show_to_status
from orchestrator.git.repo import tree_patch
from orchestrator.loop.parts import LoopParts

DIFF_BYTES = 200_000  # bound on a diff kept in memory or sent anywhere
T = TypeVar("T")


class SubtaskTree:
    def __init__(self, parts: LoopParts, event: Callable[..., None]) -> None:
        self.p, self.event = parts, event
        self.base = ""  # the commit the subtask started from
        self.branch: str | None = None  # the branch it started on; None: a detached HEAD
        self.hidden: set[str] = set()  # paths git was told not to look at when it started
        self.before: set[str] = set()  # changed or untracked when it started: never the attempt's

    async def start(self) -> set[str]:
        """Note the base and the paths changed or untracked before the subtask (none in a
        fresh worktree); returns those paths."""
        self.base = await git(self.p.repo.head)
        self.branch = self.p.repo.branch()
        self.hidden = await git(hidden_from_status, self.p.repo)
        self.before = set(await git(self.p.repo.dirty_paths))
        return self.before

    async def changed_files(self) -> list[str]:
        return await git(self.p.repo.changed_files, self.base, self.before)

    async def diff(self) -> str:
        return await git(self.p.repo.diff, self.base, self.before, DIFF_BYTES)

    async def snapshot(self, paths: list[str] | None = None) -> str:
        """The attempt's patch; of `paths` when the caller knows what it changed."""
        return await git(self.p.repo.snapshot, self.base, self.before, paths)

    async def patch_of(self, tree: str, paths: list[str]) -> str:
        """The patch of a judged tree object, of the `paths` it changed: what its commit holds."""
        return await git(tree_patch, self.p.repo, self.base, tree, paths)

    async def unhide(self) -> list[str]:
        """Paths an attempt told git not to look at (skip-worktree, assume-unchanged), shown
        to git again, so that their edits are seen and judged; returns them."""
        hidden = sorted(await git(hidden_from_status, self.p.repo) - self.hidden)
        await git(show_to_status, self.p.repo, hidden)
        return hidden

    async def fold_commits(self) -> list[str]:
        """An agent's own commits since the base, back to changes in the tree."""
        return await git(self.p.repo.fold_commits_since, self.base, self.branch)

    async def hold(self, paths: list[str]) -> None:
        """An attempt's output, reproducible from now on: no undo loses it."""
        await git(self.p.repo.hold, paths)

    async def restore(self) -> None:
        """The worktree back to the subtask's start: nothing in it is the user's to keep."""
        await git(self.p.repo.restore, self.base, self.before)

    async def apply(self, patch: str) -> None:
        await git(self.p.repo.apply_snapshot, patch)

    async def commit(self, paths: list[str], message: str, judged: str | None = None) -> str:
        """Commit `paths` in the worktree; `judged`: the tree the checks passed, which is what
        is committed. A kill midway leaves a worktree the next run removes."""
        return await git(functools.partial(self.p.repo.commit, paths, message, judged=judged))


async def git(fn: Callable[..., T], *args: Any) -> T:
    """Git work off the event loop."""
    return await anyio.to_thread.run_sync(functools.partial(fn, *args))
