"""The working tree as one subtask sees it: its base commit and the user's own files.

Every git call runs off the event loop, so parallel workers' checks keep running. The
tree goes back in two ways only: `restore` (to the base; the user's dirty files
untouched) and `apply` (an earlier attempt's patch, right after a restore). Before
either overwrites a file, the bytes nothing else holds are kept (recovery/recovered.py)
and said in a `files_kept` event.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from orchestrator.git.index_flags import hidden_from_status, show_to_status
from orchestrator.loop.parts import LoopParts
from orchestrator.loop.user_files import UserFiles
from orchestrator.recovery.recovered import Keeper, kept_event

DIFF_BYTES = 200_000  # bound on a diff kept in memory or sent anywhere
T = TypeVar("T")


class SubtaskTree:
    def __init__(self, parts: LoopParts, event: Callable[..., None]) -> None:
        self.p, self.event = parts, event
        self.base = ""  # the commit the subtask started from
        self.branch: str | None = None  # the branch it started on; None: a detached HEAD
        self.hidden: set[str] = set()  # paths git was told not to look at when it started
        self.user_files = UserFiles(parts.repo.root, set())

    async def start(self) -> set[str]:
        """Note the base and the user's own dirty paths (untracked, or modified with
        --allow-dirty): never counted, committed or restored. Returns those paths."""
        self.base = await git(self.p.repo.head)
        self.branch = self.p.repo.branch()
        self.hidden = await git(hidden_from_status, self.p.repo)
        dirty = set(await git(self.p.repo.dirty_paths))
        self.user_files = UserFiles(self.p.repo.root, dirty)
        return dirty

    async def changed_files(self) -> list[str]:
        return await git(self.p.repo.changed_files, self.base, self.user_files.paths)

    async def diff(self) -> str:
        return await git(self.p.repo.diff, self.base, self.user_files.paths, DIFF_BYTES)

    async def snapshot(self, paths: list[str] | None = None) -> str:
        """The attempt's patch; of `paths` when the caller knows what it changed."""
        return await git(self.p.repo.snapshot, self.base, self.user_files.paths, paths)

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
        kept: list[str] = []
        await git(self.p.repo.restore, self.base, self.user_files.paths,
                  lambda paths: kept.extend(self.keeper.keep(paths)))
        self._said_kept(kept)

    async def apply(self, patch: str) -> None:
        await git(self.p.repo.apply_snapshot, patch)

    async def commit(self, paths: list[str], message: str, before_ref: Callable[[str, str], None],
                     judged: str | None = None) -> str:
        """Commit `paths`; `judged`: the tree the checks passed, which is what is committed."""
        return await git(functools.partial(self.p.repo.commit, paths, message, before_ref=before_ref, judged=judged))

    def keep(self, paths: list[str]) -> None:
        """Before `paths` are overwritten: the bytes nothing else holds, kept."""
        self._said_kept(self.keeper.keep(paths))

    def _said_kept(self, kept: list[str]) -> None:
        if kept:
            self.event("files_kept", **kept_event(self.keeper.folder, self.p.project_dir, kept))

    @functools.cached_property
    def keeper(self) -> Keeper:
        return Keeper(self.p.repo, self.p.layout.recovered(self.p.session_id))


async def git(fn: Callable[..., T], *args: Any) -> T:
    """Git work off the event loop."""
    return await anyio.to_thread.run_sync(functools.partial(fn, *args))
