"""Bytes goldenloop is about to overwrite or delete, and could not give back: kept first.

Whose a change is can never be proved by its timing: a user may write a file a moment
after a run was killed, or while its checks run. So before any undo (recovery after a
kill, an escalation's restore, a roll back, a put back, an interrupt, a user's file
written back) every file about to be overwritten or removed is copied to
`.openagents/recovered/<runId>/<path>`, unless git's object store already holds its exact
bytes: an attempt's output is written there the moment the attempt ends (`Repo.hold`), so
only what nobody can reproduce is kept. The folder is git-ignored and goldenloop never
empties it.

A folder rather than a commit on a private ref: a user finds and copies back plain
files without knowing git, and nothing is added to the repository's history or refs.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from orchestrator.git.repo import Repo


class Keeper:
    def __init__(self, repo: Repo, folder: Path) -> None:
        self.repo, self.folder = repo, folder

    def keep(self, paths: list[str]) -> list[str]:
        """Copy the files among `paths` whose bytes nothing else holds; the paths copied."""
        root = self.repo.root
        files = [rel for rel in paths if os.path.lexists(root / rel) and not (root / rel).is_dir()]
        held = self.repo.held(files) if files else set()
        kept = [rel for rel in files if rel not in held]
        for rel in kept:
            self._copy(rel)
        return kept

    def _copy(self, rel: str) -> None:
        source, target = self.repo.root / rel, self.folder / rel
        for n in range(1, 1000):  # a second undo of the same path in one run: both versions stay
            if not os.path.lexists(target) or _same(source, target):
                break
            target = self.folder / f"{rel}.{n}"
        target.parent.mkdir(parents=True, exist_ok=True)
        if os.path.lexists(target):
            return
        shutil.copy2(source, target, follow_symlinks=False)


def _same(a: Path, b: Path) -> bool:
    if a.is_symlink() or b.is_symlink():
        return a.is_symlink() and b.is_symlink() and os.readlink(a) == os.readlink(b)
    return a.read_bytes() == b.read_bytes()


def kept_event(folder: Path, project_dir: Path, paths: list[str]) -> dict[str, object]:
    """The fields of a `files_kept` event: where, relative to the project when inside it."""
    shown = folder.relative_to(project_dir) if folder.is_relative_to(project_dir) else folder
    return {"folder": f"{shown}/", "paths": paths}
