"""A parallel task's way onto the base branch, written down before it is taken.

A parallel worker's loop closes its task on the board when the task passes in the
worker's worktree, before its commits reach the base branch. A run killed in between
would leave a task "closed" whose work is nowhere on the branch: a false "done". So
`.openagents/journal/<taskId>.landing` exists from before the task runs until the board
names the commits that landed, and names them itself just before the merge. The next run
reads what a killed one left (`KilledRun.finish_killed_landings`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson

from orchestrator.layout import Layout, safe_name
from reflection.fileio import atomic_write

SUFFIX = ".landing"


def _path(root: Path, task_id: str) -> Path:
    return Layout(root).journals / f"{safe_name(task_id)}{SUFFIX}"


def expect(root: Path, task_id: str) -> None:
    """Before the task runs: a close of it means nothing until its commits have landed.
    Fsynced, as the board's close is: this must be on disk first."""
    path = _path(root, task_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, orjson.dumps({"commits": []}))


def landing(root: Path, task_id: str, commits: list[str]) -> None:
    """Just before the merge: the commits about to land on the base branch. Not fsynced,
    as git's merge is not: a power cut that loses this loses the merge too, or makes the
    next run open the task again, which is work done twice, never a false "done"."""
    atomic_write(_path(root, task_id), orjson.dumps({"commits": commits}), durable=False)


def landed(root: Path, task_id: str) -> None:
    """The board says where the task's commits are (or that it is not closed): nothing to settle."""
    _path(root, task_id).unlink(missing_ok=True)


def left(root: Path) -> Iterator[tuple[Path, str, list[str]]]:
    """Each record a killed run left: (its file, the task's name in it, the commits it
    names; none when it cannot be read, which is the careful reading)."""
    folder = Layout(root).journals
    for path in sorted(folder.glob(f"*{SUFFIX}")) if folder.is_dir() else []:
        try:
            commits = [str(c) for c in orjson.loads(path.read_bytes())["commits"]]
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
            commits = []
        yield path, path.name.removesuffix(SUFFIX), commits
