"""What judges an attempt, as the run read it: project.json and the prompt files it names.

An attempt may not change how it is judged: whatever an agent writes there is put back
as the run read it (in a worktree, the worktree's copies), and the attempt is rejected.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path, PurePosixPath

from orchestrator.config import ProjectConfig
from orchestrator.layout import FOLDER
from reflection.fileio import atomic_write


class JudgingFiles:
    def __init__(self, root: Path, content: dict[str, bytes | None]) -> None:
        self.root, self.content = root, content  # path -> bytes as read; None: absent

    @classmethod
    def read(cls, root: Path, config: ProjectConfig) -> JudgingFiles:
        return cls(root, {rel: _read(root / rel) for rel in judging_files(config)})

    def put_back(self, keep: Callable[[list[str]], object]) -> str | None:
        """The files as the run read them (`keep` is given the changed ones first); why the
        attempt is rejected if it changed one, else None."""
        changed = [rel for rel, before in self.content.items() if _read(self.root / rel) != before]
        keep(changed)
        for rel in changed:
            path, before = self.root / rel, self.content[rel]
            if before is None:
                path.unlink(missing_ok=True)
            else:
                atomic_write(path, before)
        if not changed:
            return None
        return (f"rejected: the attempt changed {', '.join(changed)}, which says how attempts are judged; "
                "it was put back. Nothing under .openagents/, and no prompt file, is an attempt's to change")


def judging_files(config: ProjectConfig) -> list[str]:
    """The repository files that decide how an attempt is judged."""
    return [str(PurePosixPath(FOLDER, "project.json")),
            *(f for f in (config.reflexion.prompt_file, config.review.prompt_file) if f)]


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
