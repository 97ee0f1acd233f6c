"""The Reflect skill's history: `<project>/.openagents/memory/reflect-history.jsonl`.

One JSON line per `ReflectResult`, appended under `reflection.fileio.file_lock`, so
writers in any number of threads and processes never lose or interleave a line. The
lock also makes the per-session limit exact: counting a session's records and appending
one more happen in one critical section. The counts are kept per open store and brought
up to date by reading only what was appended since (a new inode or a shorter file, as
after a clear, starts the count over), so an append does not re-read the whole file.

Clearing never deletes: the file is renamed, atomically, to
`memory/archive/reflect-history-<UTC timestamp>.jsonl`.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import orjson

from reflection.fileio import file_lock
from reflection.reflect_skill import ReflectResult

HISTORY_PATH = Path(".openagents") / "memory" / "reflect-history.jsonl"
ARCHIVE_FOLDER = "archive"
DEFAULT_MAX_PER_SESSION = 3


class ReflectionLimitReached(Exception):
    """A session already holds as many reflections as a project allows."""

    def __init__(self, session_id: str, limit: int) -> None:
        super().__init__(
            f"session {session_id!r} already has {limit} reflection{'s' if limit != 1 else ''} in this project, "
            f"the most REFLECT_MAX_REFLECTIONS allows; clear the history to reflect on it again"
        )
        self.session_id = session_id
        self.limit = limit


@dataclass(frozen=True)
class Archived:
    """What a clear moved: how many records, and where (None when there was nothing)."""

    count: int
    path: Path | None


class ReflectHistory:
    """One project's reflect history; safe to share between threads."""

    def __init__(self, project_dir: Path, *, max_per_session: int = DEFAULT_MAX_PER_SESSION) -> None:
        if max_per_session < 1:
            raise ValueError("max_per_session must be 1 or more")
        self.path = Path(project_dir) / HISTORY_PATH
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.max_per_session = max_per_session
        # Threads of this process queue here instead of polling the file lock.
        self._mutex = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._seen: tuple[int, int] = (-1, 0)  # (inode, bytes counted)

    def append(self, result: ReflectResult) -> None:
        """Add one result; ReflectionLimitReached when its session is full."""
        line = orjson.dumps(result.to_dict()) + b"\n"
        with self._mutex, file_lock(self.lock_path):
            if self._refresh()[result.session_id] >= self.max_per_session:
                raise ReflectionLimitReached(result.session_id, self.max_per_session)
            _append_line(self.path, line)
            self._refresh()  # reads back just this line (and a torn one's end, if any)

    def count_for(self, session_id: str) -> int:
        """How many live records a session holds, as far as complete lines show.

        No file lock: appends are single O_APPEND writes and only whole lines are
        counted, so this never waits for a writer's fsync; `append` counts again
        under the lock, which is what the limit rests on."""
        with self._mutex:
            return self._refresh()[session_id]

    def full(self, session_id: str) -> bool:
        return self.count_for(session_id) >= self.max_per_session

    def records(self, limit: int | None = None) -> list[dict]:
        """The stored results, newest first; a torn or unreadable line is skipped."""
        with self._mutex, file_lock(self.lock_path):
            data = _read(self.path)
        found: list[dict] = []
        for raw in reversed(data.split(b"\n")):
            record = _load(raw)
            if record is not None:
                found.append(record)
                if limit is not None and len(found) >= limit:
                    break
        return found

    def archive(self) -> Archived:
        """Move the whole history to the archive folder; nothing is deleted."""
        with self._mutex, file_lock(self.lock_path):
            data = _read(self.path)
            count = sum(1 for raw in data.split(b"\n") if _load(raw) is not None)
            if not data:
                return Archived(0, None)
            target = _archive_target(self.path.parent / ARCHIVE_FOLDER)
            os.replace(self.path, target)  # same file system: one atomic rename
            _fsync_dir(self.path.parent)
            self._counts.clear()
            self._seen = (-1, 0)
            return Archived(count, target)

    def _refresh(self) -> Counter[str]:
        """The per-session counts, after reading the whole lines appended since."""
        try:
            handle = open(self.path, "rb")
        except FileNotFoundError:
            self._counts.clear()
            self._seen = (-1, 0)
            return self._counts
        with handle:
            stat = os.fstat(handle.fileno())  # of the file opened, even if it was just archived
            inode, counted = self._seen
            if inode != stat.st_ino or stat.st_size < counted:
                self._counts.clear()
                counted = 0
            handle.seek(counted)
            tail = handle.read(stat.st_size - counted)
        whole = tail[: tail.rfind(b"\n") + 1]  # a line still being written is counted next time
        for raw in whole.split(b"\n"):
            record = _load(raw)
            if record is not None and isinstance(record.get("sessionId"), str):
                self._counts[record["sessionId"]] += 1
        self._seen = (stat.st_ino, counted + len(whole))
        return self._counts


def _append_line(path: Path, line: bytes) -> None:
    """One write with O_APPEND, fsynced, on a line of its own even after a torn write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        written = os.write(fd, line)
        while written < len(line):
            written += os.write(fd, line[written:])
        os.fsync(fd)
    finally:
        os.close(fd)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def _load(raw: bytes) -> dict | None:
    if not raw.strip():
        return None
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None


def _archive_target(folder: Path) -> Path:
    """A new file name in the archive; a second clear in the same microsecond gets a suffix."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    target = folder / f"reflect-history-{stamp}.jsonl"
    n = 1
    while target.exists():
        n += 1
        target = folder / f"reflect-history-{stamp}-{n}.jsonl"
    return target


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
