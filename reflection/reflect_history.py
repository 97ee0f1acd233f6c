"""The Reflect skill's history: `<project>/.openagents/memory/reflect-history.jsonl`.

One JSON line per `ReflectResult`, appended under an advisory lock on
`reflect-history.jsonl.lock`, so writers in any number of threads and processes never
lose or interleave a line. The lock also makes the per-session limit exact: counting a
session's records and appending one more happen in one critical section. The counts are
kept per open store and brought up to date by reading only what was appended since (a
new inode or a shorter file, as after a clear, starts the count over), so an append does
not re-read the whole file.

Clearing never deletes: the file is renamed, atomically, to
`memory/archive/reflect-history-<UTC timestamp>.jsonl`.

The server names these files on behalf of its callers, so they are opened the careful
way: every folder from `/` down to `memory/` (and `archive/`) is opened relative to its
parent with O_NOFOLLOW, and the files themselves with O_NOFOLLOW and O_NONBLOCK, then
checked to be regular files. A link anywhere on that way, or a FIFO, socket or folder
where a file belongs, is an `UnsafeHistoryPath`: never followed, never waited on, and no
check-then-open race, since each step opens what it checked.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import orjson

from reflection.fileio import LockTimeout
from reflection.reflect_skill import ReflectResult

HISTORY_PATH = Path(".openagents") / "memory" / "reflect-history.jsonl"
HISTORY_NAME = HISTORY_PATH.name
LOCK_NAME = HISTORY_NAME + ".lock"
ARCHIVE_FOLDER = "archive"
DEFAULT_MAX_PER_SESSION = 3
DEFAULT_LOCK_WAIT_S = 10.0

# O_PATH walks through folders the server may search but not list; it is Linux only.
_WALK = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC  # can be fsynced
_FILE = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_KINDS = {stat.S_IFDIR: "a folder", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket",
          stat.S_IFCHR: "a device", stat.S_IFBLK: "a device"}


class UnsafeHistoryPath(Exception):
    """A link, or something other than a regular file or folder, where the history lives."""


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


class Unsynced:
    """Appends written to the history but not yet fsynced; the results refused (a full
    session: `refused[i]` for `results[i]`, else None); what was wrong, if anything, with
    the memory files it was asked to check on its way (`checked`)."""

    def __init__(self, history: ReflectHistory, fd: int, number: int, refused: list[ReflectionLimitReached | None],
                 checked: tuple[str, ...] = (), unsafe: Exception | None = None) -> None:
        self._history, self._fd, self._number = history, fd, number
        self.refused, self.checked, self.unsafe = refused, checked, unsafe

    def wait(self) -> None:
        """Return once the appends are on disk; the descriptor is closed either way."""
        if self._fd < 0:
            return
        try:
            self._history._make_durable(self._fd, self._number)
        finally:
            self.close()

    def close(self) -> None:
        """Let go of the descriptor (no answer was given: nothing was promised)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class ReflectHistory:
    """One project's reflect history; safe to share between threads."""

    def __init__(self, project_dir: Path, *, max_per_session: int = DEFAULT_MAX_PER_SESSION,
                 lock_wait_s: float = DEFAULT_LOCK_WAIT_S) -> None:
        if max_per_session < 1:
            raise ValueError("max_per_session must be 1 or more")
        self.project = Path(project_dir)
        self.path = self.project / HISTORY_PATH
        self.max_per_session = max_per_session
        self.lock_wait_s = lock_wait_s
        # Threads of this process queue here instead of polling the file lock.
        self._mutex = threading.Lock()
        # Group commit: appends are numbered; one fsync makes every append before it durable.
        self._sync_mutex = threading.Lock()
        self._written = 0
        self._synced = 0
        self._counts: Counter[str] = Counter()
        self._seen: tuple[int, int] = (-1, 0)  # (inode, bytes counted)
        self._size = 0  # the history's size when last counted (its last line may be unfinished)

    def append(self, result: ReflectResult) -> None:
        """Add one result, on disk (fsynced) when this returns; ReflectionLimitReached
        when its session is full."""
        written = self.append_unsynced([result])
        if written.refused[0] is not None:
            written.close()
            raise written.refused[0]
        written.wait()

    def append_unsynced(self, results: Sequence[ReflectResult], *, check: tuple[str, ...] = ()) -> Unsynced:
        """Add results in one critical section, in order, each unless its session is full
        (then its `refused` entry says so); written but not yet fsynced: `wait()` on the
        answer makes them durable, outside the file lock, so that one fsync serves every
        append before it. `check`: memory files checked as `check_memory_files` checks
        them, on the same way into the memory folder; what is wrong with them is the
        answer's `unsafe`."""
        lines = [(result.session_id, orjson.dumps(result.to_dict()) + b"\n") for result in results]
        with self._mutex, self._memory(create=True) as memory:
            assert memory is not None  # created
            with _locked(memory, self.lock_wait_s):
                fd = _open_file(memory, HISTORY_NAME, os.O_RDWR | os.O_APPEND | os.O_CREAT)
                assert fd is not None  # O_CREAT
                try:
                    refused = self._append_counted(fd, lines)
                    unsafe = _problem_among(memory, check)
                except BaseException:
                    os.close(fd)
                    raise
            return Unsynced(self, fd, self._written, refused, check, unsafe)

    def _append_counted(self, fd: int, lines: list[tuple[str, bytes]]) -> list[ReflectionLimitReached | None]:
        """Count, check each session's limit, append the lines it allows in one write, and
        count them: one descriptor for all of it (caller holds the lock). A refusal for
        each line of a full session, None for the others."""
        counts = self._count(fd)
        added: Counter[str] = Counter()
        kept, refused = [], []
        for session_id, line in lines:
            full = counts[session_id] + added[session_id] >= self.max_per_session
            refused.append(ReflectionLimitReached(session_id, self.max_per_session) if full else None)
            if not full:
                added[session_id] += 1
                kept.append(line)
        data = b"".join(kept)
        if not data:
            return refused
        inode, counted = self._seen
        torn = self._size != counted  # a line left unfinished: ours start on a new one
        _write_all(fd, b"\n" + data if torn else data)
        self._written += 1
        if torn or os.fstat(fd).st_size != counted + len(data):
            self._count(fd)  # read back: the torn line's end, or a writer that took no lock
        else:
            counts.update(added)  # the file holds what was counted, then just these lines
            self._seen = (inode, counted + len(data))
        return refused

    def _make_durable(self, fd: int, number: int) -> None:
        with self._sync_mutex:
            if self._synced >= number:
                return  # an fsync that began after this append was written covered it
            upto = self._written  # every append numbered so far has been written
            os.fsync(fd)
            self._synced = max(self._synced, upto)

    def count_for(self, session_id: str) -> int:
        """How many live records a session holds, as far as complete lines show.

        No file lock: appends are single O_APPEND writes and only whole lines are
        counted, so this never waits for a writer's fsync; `append` counts again
        under the lock, which is what the limit rests on."""
        with self._mutex, self._memory() as memory:
            return self._refresh(memory)[session_id]

    def full(self, session_id: str) -> bool:
        return self.count_for(session_id) >= self.max_per_session

    def records(self, limit: int | None = None) -> list[dict]:
        """The stored results, newest first; a torn or unreadable line is skipped."""
        with self._mutex, self._memory() as memory:
            if memory is None:
                return []
            with _locked(memory, self.lock_wait_s):
                data = _read(memory)
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
        with self._mutex, self._memory() as memory:
            if memory is None:
                return Archived(0, None)
            with _locked(memory, self.lock_wait_s):
                data = _read(memory)
                if not data:
                    return Archived(0, None)
                name = _move_to_archive(memory)
            self._counts.clear()
            self._seen = (-1, 0)
            count = sum(1 for raw in data.split(b"\n") if _load(raw) is not None)
            return Archived(count, self.path.parent / ARCHIVE_FOLDER / name)

    def check_memory_files(self, *names: str) -> None:
        """UnsafeHistoryPath when `.openagents`, `memory` or one of these files in it is a
        link or no regular file; the memory folder is made when missing. For a store that
        opens the files by path (reflections.jsonl), checked just before it writes."""
        with self._mutex, self._memory(create=True) as memory:
            assert memory is not None  # created
            for name in names:
                fd = _open_file(memory, name, os.O_RDONLY)
                if fd is not None:
                    os.close(fd)

    @contextmanager
    def _memory(self, *, create: bool = False) -> Iterator[int | None]:
        """A descriptor on `.openagents/memory`, reached without following a link; None when
        it does not exist (and `create` is false)."""
        opened = [_open_folder_path(self.project)]
        try:
            for name, shown, flags in ((".openagents", ".openagents", _WALK), ("memory", MEMORY_SHOWN, _FOLDER)):
                child = _child_folder(opened[-1], name, shown, create=create, flags=flags)
                if child is None:
                    break
                opened.append(child)
            yield opened[-1] if len(opened) == 3 else None
        finally:
            for fd in opened:
                os.close(fd)

    def _refresh(self, memory: int | None) -> Counter[str]:
        """The per-session counts, after reading the whole lines appended since."""
        fd = None if memory is None else _open_file(memory, HISTORY_NAME, os.O_RDONLY)
        if fd is None:
            self._counts.clear()
            self._seen = (-1, 0)
            return self._counts
        try:
            return self._count(fd)
        finally:
            os.close(fd)

    def _count(self, fd: int) -> Counter[str]:
        """`_refresh` on the history file opened as `fd`."""
        stat_ = os.fstat(fd)  # of the file opened, even if it was just archived
        inode, counted = self._seen
        if inode != stat_.st_ino or stat_.st_size < counted:
            self._counts.clear()
            counted = 0
        tail = _read_from(fd, counted, stat_.st_size)
        self._size = counted + len(tail)  # the file's size as read
        whole = tail[: tail.rfind(b"\n") + 1]  # a line still being written is counted next time
        for raw in whole.split(b"\n"):
            record = _load(raw)
            if record is not None and isinstance(record.get("sessionId"), str):
                self._counts[record["sessionId"]] += 1
        self._seen = (stat_.st_ino, counted + len(whole))
        return self._counts


MEMORY_SHOWN = str(HISTORY_PATH.parent)


def _open_folder_path(folder: Path) -> int:
    """The project folder, opened from `/` one step at a time: a folder on its (resolved)
    way that was swapped for a link since it was checked is refused, not followed."""
    fd = os.open("/", _WALK)
    for part in folder.parts[1:]:
        try:
            child = os.open(part, _WALK, dir_fd=fd)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR):
                raise UnsafeHistoryPath(f"the project folder {folder} changed while it was opened "
                                        f"({part} is no longer a plain folder)") from None
            raise
        os.close(fd)
        fd = child
    return fd


def _child_folder(parent: int, name: str, shown: str, *, create: bool, flags: int) -> int | None:
    try:
        return os.open(name, flags, dir_fd=parent)
    except FileNotFoundError:
        if not create:
            return None
    except OSError as exc:  # O_PATH opens a link as itself, so O_DIRECTORY says ENOTDIR
        raise _unsafe(exc, shown, link=_is_link(parent, name)) from None
    with suppress(FileExistsError):  # made meanwhile, or a link made meanwhile: the open refuses it
        os.mkdir(name, dir_fd=parent)
    try:
        return os.open(name, flags, dir_fd=parent)
    except OSError as exc:
        raise _unsafe(exc, shown, link=_is_link(parent, name)) from None


def _is_link(folder: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _open_file(memory: int, name: str, flags: int) -> int | None:
    """A regular file of the memory folder, or None when it does not exist."""
    shown = f"{MEMORY_SHOWN}/{name}"
    try:
        fd = os.open(name, flags | _FILE, 0o644, dir_fd=memory)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _unsafe(exc, shown) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _not_regular(shown, _KINDS.get(stat.S_IFMT(mode), "no file"))
    return fd


def _problem_among(memory: int, names: tuple[str, ...]) -> Exception | None:
    """What `check_memory_files` would raise for these files, or None."""
    try:
        for name in names:
            fd = _open_file(memory, name, os.O_RDONLY)
            if fd is not None:
                os.close(fd)
    except (UnsafeHistoryPath, OSError) as exc:
        return exc
    return None


def _unsafe(exc: OSError, shown: str, *, link: bool = False) -> Exception:
    if link or exc.errno in (errno.ELOOP, errno.EMLINK):  # O_NOFOLLOW met a link (EMLINK on FreeBSD)
        return UnsafeHistoryPath(f"the project's {shown} is a symbolic link; "
                                 f"this server follows no link inside {MEMORY_SHOWN}")
    if exc.errno == errno.ENOTDIR:
        return UnsafeHistoryPath(f"the project's {shown} is a file where a folder belongs")
    if exc.errno == errno.EISDIR:
        return _not_regular(shown, "a folder")
    if exc.errno == errno.ENXIO:  # a socket, or a FIFO opened for writing
        return _not_regular(shown, "a socket or a FIFO")
    return exc


def _not_regular(shown: str, kind: str) -> UnsafeHistoryPath:
    return UnsafeHistoryPath(f"the project's {shown} is {kind}, not a regular file; "
                             "this server uses only regular files there")


@contextmanager
def _locked(memory: int, wait_s: float) -> Iterator[None]:
    """The history's advisory lock, shared with every other process that writes it."""
    fd = _open_file(memory, LOCK_NAME, os.O_RDWR | os.O_CREAT)
    assert fd is not None  # O_CREAT
    try:
        _flock_within(fd, wait_s)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _flock_within(fd: int, wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise LockTimeout(f"another process has held the project's reflect history "
                                  f"for more than {wait_s:g} seconds") from None
            time.sleep(0.01)


def _write_all(fd: int, data: bytes) -> None:
    """One write with O_APPEND (a short one finished by more)."""
    written = os.write(fd, data)
    while written < len(data):
        written += os.write(fd, data[written:])


def _read_from(fd: int, start: int, end: int) -> bytes:
    """The bytes of `fd` from `start` up to `end` (fewer if the file is shorter)."""
    parts = []
    while start < end:
        part = os.pread(fd, end - start, start)
        if not part:
            break
        parts.append(part)
        start += len(part)
    return b"".join(parts)


def _read(memory: int) -> bytes:
    fd = _open_file(memory, HISTORY_NAME, os.O_RDONLY)
    if fd is None:
        return b""
    with open(fd, "rb") as handle:
        return handle.read()


def _load(raw: bytes) -> dict | None:
    if not raw.strip():
        return None
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None


def _move_to_archive(memory: int) -> str:
    """Rename the history into `archive/` (one atomic rename; the archive must be a real
    folder, or the history would leave the project); returns its new name."""
    archive = _child_folder(memory, ARCHIVE_FOLDER, f"{MEMORY_SHOWN}/{ARCHIVE_FOLDER}", create=True, flags=_FOLDER)
    assert archive is not None  # created
    try:
        name = _archive_name(archive)
        history = _open_file(memory, HISTORY_NAME, os.O_RDONLY)
        if history is not None:  # appends not yet fsynced go with it, durable: their fsync may be another's
            try:
                os.fsync(history)
            finally:
                os.close(history)
        os.rename(HISTORY_NAME, name, src_dir_fd=memory, dst_dir_fd=archive)
        os.fsync(archive)
        os.fsync(memory)
    finally:
        os.close(archive)
    return name


def _archive_name(archive: int) -> str:
    """A new file name in the archive; a second clear in the same microsecond gets a suffix."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    name, n = f"reflect-history-{stamp}.jsonl", 1
    while _exists(archive, name):
        n += 1
        name = f"reflect-history-{stamp}-{n}.jsonl"
    return name


def _exists(folder: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
