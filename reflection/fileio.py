"""Small file helpers shared by both packages (here, in the one orchestrator builds on):
atomic rewrites, cross-process locks, and opening a memory file that must be a file.

`atomic_write` guarantees a reader (or a crash) sees either the old file or the new one,
never half of each. `file_lock` serialises read-modify-write cycles between processes
with an advisory `flock` on a sidecar file, so the data file itself is only ever replaced,
never locked or truncated in place.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

log = logging.getLogger("goldenloop.fileio")

_POLL_START_S = 0.005
_POLL_MAX_S = 0.1


class LockTimeout(TimeoutError):
    """The lock stayed held by someone else for longer than the caller would wait."""


class MemoryFileError(Exception):
    """The reflections file (or its archive) cannot be used as one; the message is one sentence."""


def unusable(path: Path, why: str) -> MemoryFileError:
    return MemoryFileError(f"the memory file {path} cannot be used: {why}; fix it, or move it out of the way "
                           "and goldenloop starts a new one")


def open_for_reading(path: Path) -> int | None:
    """A read descriptor on the regular file at `path`; None when there is none.

    Anything else there (a folder, a FIFO, a file that cannot be read) is a
    MemoryFileError: reading it would fail later with a traceback, or hang.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block the open
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise unusable(path, exc.strerror or str(exc)) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise unusable(path, "it is not a regular file")
    return fd


def _read_umask() -> int:
    # os.umask can only be read by setting it; done once, at import, before any threads.
    current = os.umask(0o022)
    os.umask(current)
    return current


_NEW_FILE_MODE = 0o666 & ~_read_umask()


def atomic_write(path: Path, data: bytes, *, durable: bool = True, folder_synced: bool = True) -> None:
    """Replace `path` with `data` so that it is never seen half-written, even after a crash.

    The data goes to a temporary file in the same directory (a rename is only atomic
    within one file system), is flushed and fsynced, renamed over `path`, and the
    directory is fsynced so the rename itself survives a power loss. An existing file's
    permission bits are kept; a new file gets the usual umask-derived mode.

    `durable=False` skips both fsyncs, for files no recovery reads after a power loss
    (reports written again by the next run, the sessions of processes a reboot ended):
    a reader or a killed process still sees the old file or the new one, never half.
    `folder_synced=False` leaves the directory's fsync to the caller's next durable write
    in the same directory, which makes this rename durable with its own (files written
    together: one directory fsync, not one each).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.chmod(tmp, _mode_for(path))
        os.replace(tmp, path)
    except BaseException:
        with suppress(FileNotFoundError):
            tmp.unlink()
        raise
    if durable and folder_synced:
        _fsync_directory(path.parent)


def _mode_for(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        return _NEW_FILE_MODE


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as exc:
        # Some file systems (certain network mounts) refuse to fsync a directory; the
        # rename has happened, only its durability across a power cut is weaker.
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
        log.debug("cannot fsync directory %s: %s", directory, exc)
    finally:
        os.close(fd)


@contextmanager
def file_lock(path: Path, *, timeout_s: float | None = 10.0) -> Iterator[None]:
    """Hold an exclusive advisory lock on the sidecar file `path` for the `with` block.

    The lock file (and its parent directories) is created when missing and left in
    place afterwards: deleting it would let two processes lock two different inodes.
    `timeout_s=None` waits for as long as it takes. The lock is not re-entrant: taking
    it twice in one process, even from one thread, waits for itself.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        _acquire(fd, path, timeout_s)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _acquire(fd: int, path: Path, timeout_s: float | None) -> None:
    if timeout_s is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    deadline = time.monotonic() + timeout_s
    pause = _POLL_START_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LockTimeout(
                    f"could not lock {path} within {timeout_s:g}s: "
                    "another goldenloop process is holding it"
                ) from None
            time.sleep(min(pause, remaining))
            pause = min(pause * 2, _POLL_MAX_S)
