"""Closed tasks out of the way, so that a long backlog costs what a short one does.

Every run reads tasks.jsonl and every bookkeeping commit stores it whole in git again: with
100k closed tasks (20 MiB) that was a second and 20 MiB of history per task. Once the file
holds more than `over` closed tasks, all but the `over // 5` most recently closed (200 by
default) move, as their exact lines, to `.openagents/archive/tasks-<year>.jsonl` (the year they were moved). A
dependency or a lookup that names a task no longer in tasks.jsonl finds it there.

The archive is written before tasks.jsonl is rewritten, so a kill in between leaves a task
in both files (the live line wins; a later move may append it again, harmlessly), never in
neither.
"""

from __future__ import annotations

import heapq
import os
import re
from array import array
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from reflection.fileio import atomic_write, file_lock

ARCHIVE_OVER = 1000  # closed tasks tasks.jsonl may hold before the oldest move out
_CLOSED = re.compile(rb'"status"\s*:\s*"closed"')  # a cheap upper bound before parsing


def archive_closed_tasks(tasks: Path, folder: Path, *, over: int = ARCHIVE_OVER, lock_timeout_s: float | None = 10.0) -> int:
    """Move the oldest closed tasks out of `tasks` into `folder`; how many moved. The most
    recently closed fifth of `over` stay, where the user looks first."""
    if over <= 0 or not tasks.is_file():
        return 0
    with file_lock(tasks.with_suffix(tasks.suffix + ".lock"), timeout_s=lock_timeout_s):
        data = tasks.read_bytes()
        if sum(1 for _ in _CLOSED.finditer(data)) <= over:
            return 0
        closed, newest = _closed_lines(data, keep=over // 5)
        if len(closed) <= over:
            return 0
        moving = array("q", (start for start in closed if start not in newest))
        _append(folder / f"tasks-{datetime.now(UTC).year}.jsonl", data, moving)
        atomic_write(tasks, b"".join(_kept(data, moving)))
    return len(moving)


def _closed_lines(data: bytes, keep: int) -> tuple[array, set[int]]:
    """Where each closed task's line starts, in file order, and which `keep` of them were
    closed last. Held as offsets, never as parsed tasks: memory stays near the file's size."""
    closed = array("q")
    newest: list[tuple[str, int]] = []  # a heap of (closedAt, start), the oldest on top
    view = memoryview(data)
    for start, end in _line_spans(data):
        if not _CLOSED.search(data, start, end):
            continue
        try:
            task = orjson.loads(view[start:end])
        except orjson.JSONDecodeError:
            continue  # not a task: stays where the user can see the warning
        if not _is_closed_task(task):
            continue
        closed.append(start)
        entry = (str(task.get("closedAt") or task.get("closed_at") or ""), start)
        if len(newest) < keep:
            heapq.heappush(newest, entry)
        elif keep and entry > newest[0]:
            heapq.heapreplace(newest, entry)
    return closed, {start for _, start in newest}


def _is_closed_task(task: Any) -> bool:
    return isinstance(task, dict) and task.get("status") == "closed" and isinstance(task.get("id"), str) and bool(task["id"])


def _line_spans(data: bytes) -> Iterator[tuple[int, int]]:
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end + 1
        yield start, end
        start = end


def _line_at(data: bytes, start: int) -> bytes:
    end = data.find(b"\n", start)
    line = data[start:] if end < 0 else data[start : end + 1]
    return line if line.endswith(b"\n") else line + b"\n"


def _append(archive: Path, data: bytes, starts: array) -> None:
    """Append these lines, starting on a line of their own even after a torn write; fsynced."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with open(archive, "ab") as out:
        if out.tell() and not _ends_with_newline(archive):
            out.write(b"\n")
        for start in starts:
            out.write(_line_at(data, start))
        out.flush()
        os.fsync(out.fileno())


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


def _kept(data: bytes, moving: array) -> Iterator[bytes]:
    """The lines that stay, in order (`moving` is sorted, as the lines are)."""
    next_moving = iter(moving)
    skip = next(next_moving, -1)
    for start, end in _line_spans(data):
        if start == skip:
            skip = next(next_moving, -1)
            continue
        yield data[start:end]


class ArchivedTasks:
    """The tasks moved to the archive, read only when one is asked for. Only their ids are
    held (a hundred thousand parsed tasks would cost a hundred times the file)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._seen: tuple | None = None
        self._ids: set[str] = set()

    def ids(self) -> set[str]:
        files = self._files()
        seen = tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files)
        if seen != self._seen:
            self._ids = {task["id"] for task in self._tasks(files)}
            self._seen = seen
        return self._ids

    def get(self, task_id: str) -> dict[str, Any] | None:
        if task_id not in self.ids():
            return None
        return next(task for task in self._tasks(self._files()) if task["id"] == task_id)

    def _files(self) -> list[Path]:
        return sorted(self.folder.glob("tasks-*.jsonl")) if self.folder.is_dir() else []

    @staticmethod
    def _tasks(files: list[Path]) -> Iterator[dict[str, Any]]:
        for path in files:
            with open(path, "rb") as lines:
                for line in lines:
                    try:
                        task = orjson.loads(line)
                    except orjson.JSONDecodeError:
                        continue  # a torn line of a killed move: the task is still live
                    if _is_closed_task(task):
                        yield task
