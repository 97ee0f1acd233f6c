"""The user's own uncommitted files: kept as they were, whatever an attempt does.

A run with `--allow-dirty` starts on a tree holding the user's work. goldenloop never
commits, restores or mixes its edits into those files: their content is read before the
subtask starts and written back if an attempt changed it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

FILE_LIMIT = 5_000_000  # bytes of one dirty file kept to guard it; larger ones unguarded


class UserFiles:
    def __init__(self, root: Path, paths: set[str]) -> None:
        self.root = root
        self.paths = paths  # every dirty path at the start: never ours
        self.content = {rel: data for rel in paths if (data := _read(root / rel)) is not None}

    def keep(self, before: Callable[[list[str]], object]) -> list[str]:
        """Write back any file an attempt changed; returns their names. `before` is given
        them first: what is there now may be the user's own newer edit, never to be lost."""
        touched = sorted(rel for rel, data in self.content.items() if _now(self.root / rel) != data)
        if touched:
            before(touched)
        for rel in touched:
            path = self.root / rel
            if path.is_symlink():  # never write through a link the attempt put there
                path.unlink()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(self.content[rel])
        return touched


def _read(path: Path) -> bytes | None:
    if path.is_file() and not path.is_symlink() and path.stat().st_size <= FILE_LIMIT:
        return path.read_bytes()
    return None


def _now(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None
