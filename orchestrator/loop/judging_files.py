"""What judges an attempt, as the run read it: project.json, the prompt files it names,
the repository's git configuration (a hook or an fsmonitor there runs with the checks;
an exclude there leaves out of the commit a file the checks passed with),
and the backlog (a task an attempt marks closed there would never run).

An attempt may not change how it is judged: whatever an agent writes there is put back
as the run read it (in a worktree, the worktree's copies), and the attempt is rejected.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from orchestrator.config import ProjectConfig
from orchestrator.layout import FOLDER
from reflection.fileio import atomic_write

BACKLOG = str(PurePosixPath(FOLDER, "tasks.jsonl"))  # an attempt that closes another task there closes nothing


class JudgingFiles:
    def __init__(self, root: Path, content: dict[str, bytes | None]) -> None:
        self.root, self.content = root, content  # path -> bytes as read; None: absent

    @classmethod
    def read(cls, root: Path, config: ProjectConfig, git_dir: Path | None = None) -> JudgingFiles:
        """`git_dir`: the repository's (common) git folder. Its config names hooks and filters
        that run with the checks; its info/exclude hides files from what is committed."""
        paths = judging_files(config)
        if git_dir is not None:
            paths += [_shown(git_dir / name, root) for name in ("config", "info/exclude")]
        return cls(root, {rel: _read(root / rel) for rel in paths})

    def put_back(self) -> str | None:
        """The files as the run read them; why the attempt is rejected if it changed one,
        else None."""
        changed = [rel for rel, before in self.content.items() if _tampered(rel, before, _read(self.root / rel))]
        for rel in changed:
            path, before = self.root / rel, self.content[rel]
            if before is None:
                path.unlink(missing_ok=True)
            else:
                atomic_write(path, before)
        if not changed:
            return None
        return (f"rejected: the attempt changed {', '.join(changed)}, which says how attempts are judged or "
                "records what they did; "
                "it was put back. Nothing under .openagents/, no prompt file and no git configuration is an "
                "attempt's to change")


def judging_files(config: ProjectConfig) -> list[str]:
    """The repository files that decide how an attempt is judged, and the backlog it is recorded in."""
    return [str(PurePosixPath(FOLDER, "project.json")), BACKLOG,
            *(f for f in (config.reflexion.prompt_file, config.review.prompt_file) if f)]


def _tampered(rel: str, before: bytes | None, now: bytes | None) -> bool:
    if rel == BACKLOG and before is not None and now is not None:
        return not now.startswith(before)  # a task you added meanwhile (`goldenloop add`) is yours
    return now != before


def _shown(path: Path, root: Path) -> str:
    """`path` relative to `root` when inside it (`.git/config`), else absolute (a worktree's)."""
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
