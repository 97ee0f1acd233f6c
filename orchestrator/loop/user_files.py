"""The user's own uncommitted files: kept as they were, whatever an attempt does.

A run with `--allow-dirty` starts on a tree holding the user's work. goldenloop never
commits, restores or mixes its edits into those files: their content is read before the
subtask starts and written back if an attempt changed it.
"""

from __future__ import annotations

from pathlib import Path

FILE_LIMIT = 5_000_000  # bytes of one dirty file kept to guard it; larger ones unguarded


class UserFiles:
    def __init__(self, root: Path, paths: set[str]) -> None:
        self.root = root
        self.paths = paths  # every dirty path at the start: never ours
        self.content = {rel: data for rel in paths if (data := _read(root / rel)) is not None}

    def keep(self) -> list[str]:
        """Write back any file an attempt changed; returns their names."""
        touched = []
        for rel, data in self.content.items():
            path = self.root / rel
            try:
                same = path.read_bytes() == data
            except OSError:
                same = False
            if not same:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                touched.append(rel)
        return sorted(touched)


def _read(path: Path) -> bytes | None:
    if path.is_file() and not path.is_symlink() and path.stat().st_size <= FILE_LIMIT:
        return path.read_bytes()
    return None
