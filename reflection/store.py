"""Where reflections live: a store protocol, an in-memory store and the JSONL store.

The JSONL store keeps `.openagents/memory/reflections.jsonl` (docs/ARCHITECTURE.md, "Files"): append-only,
one record per line, shared by several processes and by other tools.

Writing. Each append takes an exclusive `fcntl.flock` on a sidecar `<file>.lock`, opens
the data file with O_APPEND and puts the whole line down with one `os.write`. The lock
lives on a sidecar rather than on the data file because `prune` replaces the data file
by rename: a writer that opened the old inode and then waited for a lock on it would
append to a file nobody reads any more. The sidecar is never renamed or deleted, so
every process contends for the same lock, and a writer opens the data file only once
it holds the lock. If a process died mid-write, the file ends without `\\n`; the next
append then writes `\\n` + record in the same write, so the torn bytes become one
unparseable line and nothing earlier is touched.

Reading. A store keeps an index from subtask id to the byte ranges of that subtask's
records, plus the offset up to which the file has been read. Every read stats the file
and parses only what was appended since; a trailing line without `\\n` is left for the
next read (it may be a write in progress). If the file shrank or its inode changed
(another process pruned it), the index is rebuilt from the start. Indexing parses each
line with orjson and checks that every required key is there; `Reflection` objects are
validated only for the records `recent` and `iterate` return. A line that cannot be
read as a record is skipped and logged once per store and line, naming file and line.

Other kinds of line. A line with a `kind` key is not an attempt reflection, whatever
its other keys: readers pass over it, and the outcome records of reflection.outcome
(`kind: "outcome"`, read by `outcomes()`) silently, as lines that belong here.

Moving out (`move_out`, and `prune` built on it) rewrites the file under the lock into a
temp file (kept lines byte-for-byte), fsyncs it and renames it over the original, so a
concurrent reader sees the old file or the new one, never half of one. The lines that
leave are first appended and fsynced to `<memory>/archive/reflections-<year>.jsonl`
(the year of their createdAt): a kill between the two leaves a record in both places,
never in neither. Unparseable complete lines are kept: they belong to someone else. A
final line without `\\n` that does not parse is a torn write and is dropped.

Three parts: `JsonlFile` (the lock, the descriptors, the index, the lines skipped),
`JsonlReflectionStore` (the store's API on it), `YearlyArchive` (where lines go).

POSIX only (fcntl), like the rest of goldenloop's process handling.
"""

from __future__ import annotations

import fcntl
import logging
import os
import stat
import tempfile
import threading
import weakref
from array import array
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

import orjson
from pydantic import ValidationError

from reflection.fileio import open_for_reading, unusable
from reflection.location import REFLECTIONS_PATH
from reflection.schema import Reflection, StoredLine

if TYPE_CHECKING:  # its model is built on first use: most runs never read an outcome line
    from reflection.outcome import OutcomeReflection

OUTCOME_KIND = "outcome"  # the `kind` of a task's outcome line (reflection/outcome.py)

log = logging.getLogger("goldenloop.store")

# The keys every record carries (docs/ARCHITECTURE.md, "Files"); a line without one of them is not a record.
REQUIRED_KEYS = frozenset(
    {
        "id",
        "sessionId",
        "taskId",
        "subtaskId",
        "attemptNumber",
        "category",
        "analysis",
        "suggestion",
        "actionItems",
        "confidence",
        "createdAt",
    }
)

_CHUNK = 4 << 20  # bytes per read while scanning; lines longer than this still work
_RAW_BATCH = 1000  # records per write when copying a memory in (add_raw)


@runtime_checkable
class ReflectionStore(Protocol):
    """Episodic memory of reflections: what every backend (in memory, JSONL files,
    PostgreSQL) does alike, proved by one conformance suite (tests/memory/).

    Two kinds of record share a store: attempt reflections (`Reflection`, what a retry
    reads through `recent`) and a task's outcome records (`OutcomeReflection`). Records
    keep every key they were written with, unknown ones too. Nothing is deleted: `prune`
    and `archive` move records to the store's archive, where `archived_outcomes` and
    `find` still see them. Appends from many processes are never lost or interleaved.
    """

    location: str | None  # where the reflections are kept, for people (no password); None: in memory

    def append(self, reflection: Reflection) -> None:
        """Store one reflection; every reader sees it once this returns."""
        ...

    def recent(self, subtask_id: str, limit: int = 3) -> list[Reflection]:
        """At most `limit` reflections of one subtask, the latest appended first."""
        ...

    def iterate(self) -> Iterator[Reflection]:
        """Every live attempt reflection, in the order they were appended."""
        ...

    def count(self) -> int:
        """How many live attempt reflections the store holds."""
        ...

    def empty(self) -> bool:
        """Nothing was ever stored here (cheap: a run with no memory yet opens nothing more)."""
        ...

    def prune(self, older_than: datetime) -> int:
        """Move attempt reflections created before `older_than` to the archive; how many moved."""
        ...

    def append_outcome(self, record: OutcomeReflection) -> None:
        """Store one outcome record, as `append` stores a reflection."""
        ...

    def outcomes(self) -> list[OutcomeReflection]:
        """Every live outcome record, in the order they were appended."""
        ...

    def archive(self, ids: Collection[str]) -> int:
        """Move the live outcome records with these ids to the archive; how many moved."""
        ...

    def archived_outcomes(self) -> list[OutcomeReflection]:
        """The outcome records in the archive, each id once, oldest first."""
        ...

    def find(self, record_id: str) -> dict[str, Any] | None:
        """Any record by id, live or archived, as stored (every key); None if unknown."""
        ...

    def close(self) -> None:
        """Release files or connections; the store opens them again if used."""
        ...


def _read_whole(path: Path) -> bytes | None:
    fd = open_for_reading(path)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as f:
        return f.read()


def as_utc(value: datetime) -> datetime:
    """Naive datetimes are taken as UTC, as the schema writes them."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class InMemoryReflectionStore:
    """A store for tests and for runs that should leave nothing on disk.

    It keeps its own copies, so a caller mutating a record later changes nothing here.
    """

    location = None

    def __init__(self, reflections: Iterable[Reflection] = ()) -> None:
        self._mutex = threading.Lock()
        self._records: list[Reflection] = []
        self._outcomes: list[OutcomeReflection] = []
        self._archived: list[Reflection | OutcomeReflection] = []
        for reflection in reflections:
            self.append(reflection)

    def append(self, reflection: Reflection) -> None:
        with self._mutex:
            self._records.append(reflection.model_copy(deep=True))

    def recent(self, subtask_id: str, limit: int = 3) -> list[Reflection]:
        if limit <= 0:
            return []
        found: list[Reflection] = []
        with self._mutex:
            for record in reversed(self._records):
                if record.subtask_id == subtask_id:
                    found.append(record.model_copy(deep=True))
                    if len(found) == limit:
                        break
        return found

    def iterate(self) -> Iterator[Reflection]:
        with self._mutex:
            snapshot = list(self._records)
        return (record.model_copy(deep=True) for record in snapshot)

    def count(self) -> int:
        with self._mutex:
            return len(self._records)

    def empty(self) -> bool:
        with self._mutex:
            return not (self._records or self._outcomes or self._archived)

    def prune(self, older_than: datetime) -> int:
        cutoff = as_utc(older_than)
        with self._mutex:
            leaving = [r for r in self._records if as_utc(r.created_at) < cutoff]
            self._records = [r for r in self._records if as_utc(r.created_at) >= cutoff]
            self._archived.extend(leaving)
        return len(leaving)

    def append_outcome(self, record: OutcomeReflection) -> None:
        with self._mutex:
            self._outcomes.append(record.model_copy(deep=True))

    def outcomes(self) -> list[OutcomeReflection]:
        with self._mutex:
            return [record.model_copy(deep=True) for record in self._outcomes]

    def archive(self, ids: Collection[str]) -> int:
        wanted = set(ids)
        with self._mutex:
            leaving = [r for r in self._outcomes if r.id in wanted]
            self._outcomes = [r for r in self._outcomes if r.id not in wanted]
            self._archived.extend(leaving)
        return len(leaving)

    def archived_outcomes(self) -> list[OutcomeReflection]:
        found: dict[str, Any] = {}
        with self._mutex:
            for record in self._archived:
                if getattr(record, "kind", None) == OUTCOME_KIND:
                    found.setdefault(record.id, record.model_copy(deep=True))
        return list(found.values())

    def find(self, record_id: str) -> dict[str, Any] | None:
        with self._mutex:
            for record in (*self._records, *self._outcomes, *self._archived):
                if record.id == record_id:
                    return record.to_dict()
        return None

    def close(self) -> None:
        """Nothing to release: the records live as long as the store."""


class _Handles:
    """The store's open descriptors, closed by `close()` or when the store is collected."""

    __slots__ = ("read_fd", "lock_fd", "lock_pid")

    def __init__(self) -> None:
        self.read_fd: int | None = None
        self.lock_fd: int | None = None
        self.lock_pid = 0  # flock belongs to the open file, which a fork shares

    def close_read(self) -> None:
        if self.read_fd is not None:
            os.close(self.read_fd)
            self.read_fd = None

    def close(self) -> None:
        self.close_read()
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None


def _line_batches(fd: int, pos: int, end: int) -> Iterator[tuple[int, list[bytes]]]:
    """Complete lines of fd between pos and end, in batches: (offset of first line, lines).

    Lines come without their `\\n`. Bytes after the last `\\n` before `end` are not
    returned; the caller finds them at the offset after the last batch.
    """
    size = _CHUNK
    while pos < end:
        chunk = os.pread(fd, min(size, end - pos), pos)
        if not chunk:
            return  # the file shrank under us; the next stat notices
        cut = chunk.rfind(b"\n")
        if cut < 0:
            if pos + len(chunk) >= end:
                return  # only a partial last line is left
            size *= 2  # one line longer than the chunk: read more of it
            continue
        yield pos, chunk[:cut].split(b"\n")
        pos += cut + 1
        size = _CHUNK


_FIRST_SPAN = 64 << 10  # recent() reads back from the end this much first, then more


def _end_of_last_line(fd: int, size: int) -> int:
    """The offset just after the last `\\n` of fd's first `size` bytes; 0 if none."""
    hi = size
    while hi > 0:
        lo = max(0, hi - _FIRST_SPAN)
        cut = os.pread(fd, hi - lo, lo).rfind(b"\n")
        if cut >= 0:
            return lo + cut + 1
        hi = lo
    return 0


def _regions_backwards(fd: int, size: int) -> Iterator[tuple[int, bytes]]:
    """Runs of complete lines of fd, from its end back to its start: (offset, bytes).

    Each run starts where a line starts and ends with that run's last `\\n`; the bytes
    after the file's last `\\n` are not returned. Runs grow from 64 KiB to `_CHUNK`.
    """
    hi, span = _end_of_last_line(fd, size), _FIRST_SPAN
    while hi > 0:  # hi: just after a `\\n`; everything from hi on has been returned
        lo = max(0, hi - span)
        chunk = os.pread(fd, hi - lo, lo)
        if len(chunk) < hi - lo:
            return  # the file shrank under us (truncated in place): stop where we are
        if lo == 0:
            yield 0, chunk
            return
        first = chunk.find(b"\n")
        if first == len(chunk) - 1:
            span *= 2  # no line starts in this run: one line longer than it, read more
            continue
        yield lo + first + 1, chunk[first + 1 :]
        hi, span = lo + first + 1, min(span * 2, _CHUNK)


def _candidates(region: bytes, needle: bytes | None) -> Iterator[tuple[int, bytes]]:
    """The lines of region (which ends with `\\n`) that may be records of one subtask,
    last first: (offset in region, line without `\\n`).

    needle is the subtask id as orjson writes it, quotes included. Without `\\u` or `\\/`
    a JSON string has one spelling only (the short escapes are the ones orjson writes),
    so a line whose subtaskId is that id contains needle; a line with either escape may
    spell it otherwise and is a candidate too. needle None: every line is one.
    """
    if needle is None:
        lines, starts, pos = region[:-1].split(b"\n"), [], 0
        for line in lines:
            starts.append(pos)
            pos += len(line) + 1
        yield from zip(reversed(starts), reversed(lines))
        return
    patterns = [needle, b"\\u", b"\\/"] if b"\\" in region else [needle]
    where = [region.rfind(p) for p in patterns]  # the last hit of each, before `end`
    end = len(region)
    while True:
        for i, pattern in enumerate(patterns):
            if where[i] >= end:
                where[i] = region.rfind(pattern, 0, end)
        hit = max(where)
        if hit < 0:
            return
        start = region.rfind(b"\n", 0, hit) + 1
        yield start, region[start : region.find(b"\n", hit)]
        end = start


def _load(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return None


def _may_be_object(line: bytes) -> bool:
    """Whether a line could be a JSON object at all (blank lines are nobody's business)."""
    stripped = line.strip()
    return not stripped or (stripped[:1] == b"{" and stripped[-1:] == b"}")


def _is_record(obj: Any) -> bool:
    return (
        type(obj) is dict
        and obj.keys() >= REQUIRED_KEYS
        and type(obj["subtaskId"]) is str
        and "kind" not in obj
    )


def _is_ours(obj: Any) -> bool:
    """A line of this file that is not an attempt reflection (an outcome record): no warning."""
    return type(obj) is dict and obj.get("kind") == OUTCOME_KIND


ATTEMPT_KIND = "attempt"  # what record_kind calls a line without `kind`


def record_kind(obj: Any) -> str | None:
    """"attempt" or "outcome" for a parsed line that is a record of a store (with a string
    id); None for anything else: unreadable, another tool's line, a record without its keys."""
    if type(obj) is not dict or type(obj.get("id")) is not str:
        return None
    if _is_record(obj):
        return ATTEMPT_KIND
    return OUTCOME_KIND if _is_ours(obj) else None


def in_record_order(body: dict[str, Any]) -> dict[str, Any]:
    """The keys of a record's body in the order its model writes them (identifying keys
    first, then its fields, then keys it does not know), as a human reads a line. For a
    body that came back from a store that does not keep key order (JSONB)."""
    if body.get("kind") == OUTCOME_KIND:
        from reflection.outcome import OutcomeReflection

        model: type[StoredLine] = OutcomeReflection
    else:
        model = Reflection
    order = [*model.key_order, *(field.alias or name for name, field in model.model_fields.items())]
    head = {key: body[key] for key in dict.fromkeys(order) if key in body}
    return head | body


def _is_old_record(cutoff: datetime) -> Callable[[dict[str, Any]], bool]:
    return lambda obj: _is_record(obj) and _created_before(obj, cutoff)


def record_created_at(obj: dict[str, Any]) -> datetime | None:
    """A record's createdAt, in UTC; None when absent or unreadable."""
    raw = obj.get("createdAt")
    if not isinstance(raw, str):
        return None
    try:
        return as_utc(datetime.fromisoformat(raw))
    except ValueError:
        return None


def _year_of(obj: dict[str, Any]) -> int:
    """The year of a record's createdAt; this year when it has none that reads."""
    return (record_created_at(obj) or datetime.now(UTC)).year


def _created_before(obj: dict[str, Any], cutoff: datetime) -> bool:
    """True when the record's createdAt is before cutoff; an unreadable date is kept."""
    created = record_created_at(obj)
    return created is not None and created < cutoff


def _why_not_record(obj: Any) -> str:
    if obj is None:
        return "not valid JSON"
    if type(obj) is not dict:
        return "not a JSON object"
    if "kind" in obj and obj.keys() >= REQUIRED_KEYS:
        return f"of another kind ({obj['kind']!r})"
    missing = sorted(REQUIRED_KEYS - obj.keys())
    if missing:
        return "missing " + ", ".join(missing)
    return "subtaskId is not a string"


Select = Callable[[dict[str, Any]], bool]


def _copy_kept(
    src: int, size: int, write: Callable[[bytes], object], select: Select
) -> tuple[list[bytes], bool]:
    """Write every line to keep; return (the selected lines, whether anything changed)."""
    moving: list[bytes] = []
    pos = 0
    for pos, lines in _line_batches(src, 0, size):
        for line in lines:
            obj = _load(line)
            if type(obj) is dict and select(obj):
                moving.append(line)
            else:
                write(line + b"\n")
            pos += len(line) + 1
    if pos >= size:
        return moving, bool(moving)
    tail = os.pread(src, size - pos, pos)
    obj = _load(tail)
    if obj is None:
        return moving, True  # a torn last write: dropped
    if type(obj) is dict and select(obj):
        return [*moving, tail], True
    write(tail)  # a complete object without `\n`: kept as it is
    return moving, bool(moving)


def _append_durably(path: Path, lines: list[bytes]) -> None:
    """Append lines to path in one write and fsync it, starting on a line of its own."""
    new_folder = not path.parent.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    if new_folder:
        _fsync_dir(path.parent.parent)  # the folder's own name, before a file is trusted to it
    created = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        torn = size and os.pread(fd, 1, size - 1) != b"\n"
        data = (b"\n" if torn else b"") + b"".join(line + b"\n" for line in lines)
        written = os.write(fd, data)
        while written < len(data):
            written += os.write(fd, data[written:])
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    """Make a rename or a new file's name itself durable."""
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def describe_invalid(exc: Exception) -> str:
    """One line naming what is wrong, e.g. `confidence: Input should be ... 1`."""
    if isinstance(exc, ValidationError):
        errors = exc.errors()[:3]
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'record'}: {e['msg']}" for e in errors)
    return str(exc) or type(exc).__name__


class JsonlFile:
    """One JSONL file shared by processes, as the store sees it: the sidecar lock every
    write takes, the descriptors, the incremental index of its attempt records, and the
    lines it skips (each logged once). `JsonlReflectionStore` is the store built on it.
    """

    def __init__(self, path: Path) -> None:
        self._path = Path(path)
        self._lock_path = self._path.with_name(self._path.name + ".lock")
        self._mutex = threading.Lock()
        self._handles = _Handles()
        self._finalizer = weakref.finalize(self, self._handles.close)
        self._reported: set[tuple[int, int]] = set()  # (hash of line, nth copy) warned about
        # Records recent() found invalid without the index: (file identity, offset, subtask).
        self._invalid_at: set[tuple[tuple[int, int], int, str]] = set()
        self._reset()

    @property
    def location(self) -> str:
        return str(self._path)

    @property
    def path(self) -> Path:
        return self._path

    @property
    def skipped_lines(self) -> int:
        """How many distinct lines this store has skipped (and logged) as unreadable."""
        return len(self._reported)

    def close(self) -> None:
        """Release the file descriptors; the store reopens them if used again."""
        with self._mutex:
            self._handles.close()
            self._reset()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- writing ----------------------------------------------------------------

    @contextmanager
    def _flocked(self) -> Iterator[None]:
        """The sidecar lock, held exclusively (caller holds the mutex)."""
        lock_fd = self._lock_fd()
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_fd, fcntl.LOCK_UN)

    def _lock_fd(self) -> int:
        """The sidecar lock's descriptor, opened per process so that a fork locks its own."""
        handles = self._handles
        if handles.lock_fd is None or handles.lock_pid != os.getpid():
            self._path.parent.mkdir(parents=True, exist_ok=True)
            if handles.lock_fd is not None:
                os.close(handles.lock_fd)  # inherited: the parent keeps its own copy
            handles.lock_fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            handles.lock_pid = os.getpid()
        return handles.lock_fd

    def _write_line(self, line: bytes) -> tuple[tuple[int, int], int]:
        """Append line (caller holds the lock); return the file's identity and its offset."""
        try:
            fd = os.open(self._path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644)
        except OSError as exc:
            raise unusable(self._path, exc.strerror or str(exc)) from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise unusable(self._path, "it is not a regular file")
            data = line
            if st.st_size and os.pread(fd, 1, st.st_size - 1) != b"\n":
                data = b"\n" + line  # a torn last line: start ours on a fresh one
            written = os.write(fd, data)
            while written < len(data):  # rare short write; still under the lock
                written += os.write(fd, data[written:])
            return (st.st_dev, st.st_ino), st.st_size + len(data) - len(line)
        finally:
            os.close(fd)

    def _index_own_line(self, identity: tuple[int, int], start: int, size: int, sid: str) -> None:
        """Index our own append without reading it back, if it directly follows the index."""
        if identity != self._identity or start != self._end:
            return  # the index is behind or on another file; the next read catches up
        self._add(sid, start, start + size - 1)
        self._end = start + size
        self._lines += 1

    # -- the incremental index --------------------------------------------------

    def _reset(self) -> None:
        self._identity: tuple[int, int] | None = None
        self._end = 0  # bytes of the file read into the index
        self._lines = 0  # complete lines read, for line numbers in warnings
        self._count = 0
        self._index: dict[str, array[int]] = {}  # subtask -> [start, end, start, end, ...]
        self._copies: dict[int, int] = {}  # hash of a bad line -> copies seen in this scan

    def _refresh(self) -> None:
        """Bring the index up to date with the file (caller holds the mutex)."""
        try:
            st = os.stat(self._path)
        except FileNotFoundError:
            self._handles.close_read()
            self._reset()
            return
        size = st.st_size
        if (st.st_dev, st.st_ino) != self._identity or size < self._end:
            size = self._reopen()
        if size > self._end:
            start = self._end
            self._scan(size)
            for identity, offset, sid in self._invalid_at:
                if identity == self._identity and start <= offset < self._end:
                    self._forget(sid, offset)  # recent() met it: uncounted, as it would be

    def _reopen(self) -> int:
        """Start over on whatever file is at the path now; return its size."""
        self._handles.close_read()
        self._reset()
        fd = open_for_reading(self._path)
        if fd is None:
            return 0
        self._handles.read_fd = fd
        st = os.fstat(fd)
        self._identity = (st.st_dev, st.st_ino)
        self._invalid_at = {e for e in self._invalid_at if e[0] == self._identity}
        return st.st_size

    def _scan(self, size: int) -> None:
        """Index the complete lines between the indexed end and size."""
        fd = self._handles.read_fd
        assert fd is not None
        loads, decode_error, required = orjson.loads, orjson.JSONDecodeError, REQUIRED_KEYS
        index, count, line_no = self._index, self._count, self._lines
        pos = self._end
        # The hot loop of a cold open: kept flat, with locals, because it runs per line.
        for pos, lines in _line_batches(fd, self._end, size):
            for line in lines:
                line_no += 1
                nxt = pos + len(line) + 1
                try:
                    obj = loads(line)
                except decode_error:
                    obj = None
                if (
                    type(obj) is dict
                    and obj.keys() >= required
                    and type(sid := obj["subtaskId"]) is str
                    and "kind" not in obj
                ):
                    ranges = index.get(sid)
                    if ranges is None:
                        ranges = index[sid] = array("q")
                    ranges.append(pos)
                    ranges.append(nxt - 1)
                    count += 1
                elif line.strip() and not _is_ours(obj):
                    self._report_line(line, line_no, pos, _why_not_record(obj))
                pos = nxt
        self._end, self._count, self._lines = pos, count, line_no

    def _add(self, sid: str, start: int, end: int) -> None:
        ranges = self._index.get(sid)
        if ranges is None:
            ranges = self._index[sid] = array("q")
        ranges.append(start)
        ranges.append(end)
        self._count += 1

    def _forget(self, sid: str, start: int) -> None:
        ranges = self._index.get(sid)
        if ranges is None:
            return
        for i in range(0, len(ranges), 2):
            if ranges[i] == start:
                del ranges[i : i + 2]
                self._count -= 1
                return

    # -- a record as read: validated, or skipped and reported ----------------------

    def _materialize(self, line: bytes, start: int) -> Reflection | None:
        try:
            return Reflection.from_json_line(line)
        except ValueError as exc:  # orjson and pydantic errors are both ValueErrors
            self._report_invalid(line, start, exc)
            return None

    def _iterate_one(
        self, line: bytes, pos: int, identity: tuple[int, int] | None
    ) -> Reflection | None:
        obj = _load(line)
        if not _is_record(obj):
            return None  # reported when the index read it
        try:
            return Reflection.model_validate(obj)
        except ValidationError as exc:
            with self._mutex:
                self._report_invalid(line, pos, exc)
                if identity == self._identity:
                    self._forget(obj["subtaskId"], pos)
            return None

    # -- reporting skipped lines once -------------------------------------------

    def _report_line(self, line: bytes, line_no: int, start: int, reason: str) -> None:
        key = hash(line)
        nth = self._copies.get(key, 0) + 1
        self._copies[key] = nth
        if (key, nth) in self._reported:
            return  # seen before this index was rebuilt (after a prune)
        if nth == 1 and (key, -1) in self._reported:  # recent() reported it already
            self._reported.discard((key, -1))
            self._reported.add((key, nth))
            return
        self._reported.add((key, nth))
        log.warning("%s:%d: skipping the line at byte %d that is %s", self._path, line_no, start, reason)

    def _report_unread(self, line: bytes, start: int, reason: str) -> None:
        """A line recent() met without the index (no line number): once per store."""
        key = hash(line)
        if (key, -1) in self._reported or (key, 1) in self._reported:
            return
        self._reported.add((key, -1))  # -1: taken over by _report_line as the first copy
        log.warning("%s: skipping the line at byte %d that is %s", self._path, start, reason)

    def _report_invalid(self, line: bytes, start: int, exc: Exception) -> None:
        key = (hash(line), 0)  # 0: values that fail validation, distinct from bad lines
        if key in self._reported:
            return
        self._reported.add(key)
        log.warning("%s: skipping the record at byte %d: %s", self._path, start, describe_invalid(exc))


class JsonlReflectionStore(JsonlFile):
    """The default store: `.openagents/memory/reflections.jsonl`, safe across processes.

    The API is synchronous: appends and incremental reads are short, so async callers
    may call it directly. One instance may be shared by threads.
    """

    @classmethod
    def for_project(cls, project_dir: Path) -> JsonlReflectionStore:
        """The store of a project: `<project>/.openagents/memory/reflections.jsonl`."""
        return cls(Path(project_dir) / REFLECTIONS_PATH)

    def __repr__(self) -> str:
        return f"JsonlReflectionStore({str(self._path)!r})"

    def append(self, reflection: Reflection) -> None:
        line = reflection.to_json_line()
        with self._mutex:
            with self._flocked():
                identity, start = self._write_line(line)
            self._index_own_line(identity, start, len(line), reflection.subtask_id)

    # -- reading ----------------------------------------------------------------

    def recent(self, subtask_id: str, limit: int = 3) -> list[Reflection]:
        if limit <= 0:
            return []
        with self._mutex:
            try:
                st = os.stat(self._path)
            except FileNotFoundError:
                return []
            if self._identity == (st.st_dev, st.st_ino) and st.st_size >= self._end:
                return self._recent_indexed(subtask_id, limit)  # count/iterate built it
            fd = open_for_reading(self._path)
            if fd is None:
                return []
            try:
                return self._recent_backwards(fd, subtask_id, limit)
            finally:
                os.close(fd)

    def _recent_indexed(self, subtask_id: str, limit: int) -> list[Reflection]:
        """recent() from the index, brought up to date first (caller holds the mutex)."""
        self._refresh()
        ranges, fd = self._index.get(subtask_id), self._handles.read_fd
        if not ranges or fd is None:
            return []
        found: list[Reflection] = []
        for i in range(len(ranges) - 2, -1, -2):  # newest last in the file: walk back
            start, end = ranges[i], ranges[i + 1]
            record = self._materialize(os.pread(fd, end - start, start), start)
            if record is None:
                del ranges[i : i + 2]  # only entries before i remain to visit
                self._count -= 1
                continue
            found.append(record)
            if len(found) == limit:
                break
        return found

    def _recent_backwards(self, fd: int, subtask_id: str, limit: int) -> list[Reflection]:
        """recent() without the index: fd read from its end until `limit` records are found.

        Only lines that can name the subtask are parsed (`_candidates`). Bytes after the
        last `\\n` are left alone, as the index leaves them (maybe a write in progress).
        """
        st = os.fstat(fd)
        identity = (st.st_dev, st.st_ino)
        try:
            needle: bytes | None = orjson.dumps(subtask_id)
        except orjson.JSONEncodeError:
            needle = None  # cannot be written as JSON: look at every line all the same
        found: list[Reflection] = []
        for base, region in _regions_backwards(fd, st.st_size):
            for start, line in _candidates(region, needle):
                obj = _load(line)
                if not _is_record(obj):
                    if line.strip() and not _is_ours(obj):
                        self._report_unread(line, base + start, _why_not_record(obj))
                    continue
                if obj["subtaskId"] != subtask_id:
                    continue
                try:
                    record = Reflection.model_validate(obj)
                except ValidationError as exc:
                    self._report_invalid(line, base + start, exc)
                    self._invalid_at.add((identity, base + start, subtask_id))
                    if identity == self._identity:
                        self._forget(subtask_id, base + start)
                    continue
                found.append(record)
                if len(found) == limit:
                    return found
        return found

    def iterate(self) -> Iterator[Reflection]:
        with self._mutex:
            self._refresh()
            if self._handles.read_fd is None:
                return
            # Our own descriptor, so a rebuild of the index mid-iteration cannot close it.
            fd, end, identity = os.dup(self._handles.read_fd), self._end, self._identity
        try:
            for pos, lines in _line_batches(fd, 0, end):
                for line in lines:
                    record = self._iterate_one(line, pos, identity)
                    pos += len(line) + 1
                    if record is not None:
                        yield record
        finally:
            os.close(fd)

    def count(self) -> int:
        """Records that parse and carry every required key.

        A record whose values fail validation is counted until `recent` or `iterate`
        meets it, skips it and reports it.
        """
        with self._mutex:
            self._refresh()
            return self._count

    # -- moving records out -----------------------------------------------------

    @property
    def archive_dir(self) -> Path:
        """Where records that leave the file go: `<memory>/archive/`."""
        return self._path.parent / "archive"

    def prune(self, older_than: datetime) -> int:
        """Move attempt reflections created before `older_than` to the yearly archive."""
        return self.move_out(_is_old_record(as_utc(older_than)))

    def move_out(self, select: Select) -> int:
        """Move every line whose JSON object `select` accepts to
        `archive/reflections-<year>.jsonl`; return how many moved.

        `select` sees each parsed object of the file, outcome records and foreign lines
        included. The archive is appended and fsynced before the file is rewritten.
        """
        with self._mutex:
            if not self._path.exists():
                return 0
            with self._flocked():
                return self._rewrite_moving(select)

    def _rewrite_moving(self, select: Select) -> int:
        """Replace the file by one without the selected lines (caller holds the lock)."""
        src = open_for_reading(self._path)
        if src is None:
            return 0
        try:
            st = os.fstat(src)
            fd, tmp = tempfile.mkstemp(
                dir=self._path.parent, prefix=self._path.name + ".", suffix=".tmp"
            )
            try:
                with os.fdopen(fd, "wb") as out:
                    moving, changed = _copy_kept(src, st.st_size, out.write, select)
                    out.flush()
                    os.fchmod(out.fileno(), st.st_mode & 0o7777)
                    os.fsync(out.fileno())
                self._years.append(moving)  # before the rename: never in neither place
                if changed:
                    os.replace(tmp, self._path)
                    _fsync_dir(self._path.parent)
                    log.info("%s: moved %d records to %s", self._path, len(moving), self.archive_dir)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        finally:
            os.close(src)
        return len(moving)

    @property
    def _years(self) -> YearlyArchive:
        return YearlyArchive(self.archive_dir)

    # -- raw records, for copying a memory (reflection/migrate.py) ---------------

    def raw_records(self) -> Iterator[tuple[dict[str, Any] | None, bool]]:
        """Every line of the archive (oldest year first), then of the file, parsed:
        (body, archived). The body is None for a line that is no record (`record_kind`);
        blank lines are passed over."""
        for path in self._years.paths():
            yield from _raw_lines(path, archived=True)
        yield from _raw_lines(self._path, archived=False)

    def add_raw(self, records: Iterable[tuple[dict[str, Any], bool]]) -> int:
        """Append every (body, archived) record whose id neither the file nor the archive
        holds yet: live ones to the file (under the lock, a batch per write), archived ones
        to `archive/reflections-<year>.jsonl`. How many were new. Each body must be a
        record (`record_kind`)."""
        known = {obj["id"] for obj, _ in self.raw_records() if obj is not None}
        added = 0
        live: list[bytes] = []
        archived: list[bytes] = []
        for body, is_archived in records:
            if body["id"] in known:
                continue
            known.add(body["id"])
            (archived if is_archived else live).append(orjson.dumps(in_record_order(body)))
            added += 1
            if len(live) + len(archived) >= _RAW_BATCH:
                self._put_raw(live, archived)
                live, archived = [], []
        self._put_raw(live, archived)
        return added

    def _put_raw(self, live: list[bytes], archived: list[bytes]) -> None:
        if archived:
            self._years.append(archived)
        if live:
            data = b"".join(line + b"\n" for line in live)
            with self._mutex, self._flocked():
                self._write_line(data)  # the index reads them on its next refresh

    # -- outcome records --------------------------------------------------------

    def append_outcome(self, record: OutcomeReflection) -> None:
        """Store one outcome record: the same lock and single write as `append`."""
        line = record.to_json_line()
        with self._mutex, self._flocked():
            self._write_line(line)  # the index reads it on its next refresh, and skips it

    def outcomes(self) -> list[OutcomeReflection]:
        """Every outcome record, in file order; one that fails validation is skipped and logged."""
        fd = open_for_reading(self._path)
        if fd is None:
            return []
        found: list[OutcomeReflection] = []
        try:
            for pos, lines in _line_batches(fd, 0, os.fstat(fd).st_size):
                for line in lines:
                    record = self._outcome_at(line, pos)
                    pos += len(line) + 1
                    if record is not None:
                        found.append(record)
        finally:
            os.close(fd)
        return found

    def empty(self) -> bool:
        """No reflections file yet: a project that has never remembered anything."""
        return not self._path.exists()

    def archive(self, ids: Collection[str]) -> int:
        """Move the outcome records with these ids to the yearly archive (see `move_out`)."""
        wanted = set(ids)
        if not wanted:
            return 0
        return self.move_out(lambda obj: obj.get("kind") == OUTCOME_KIND and obj.get("id") in wanted)

    def archived_outcomes(self) -> list[OutcomeReflection]:
        """The outcome records of `archive/reflections-<year>.jsonl`, oldest year first, each
        id once (a move cut short by a kill and redone may have archived a record twice)."""
        return self._years.outcomes()

    def find(self, record_id: str) -> dict[str, Any] | None:
        """Any record with this id, live first, then archived; its JSON object as stored."""
        needle = orjson.dumps(record_id)
        whole = _read_whole(self._path)
        for chunk in [whole] if whole is not None else []:
            for line in chunk.splitlines():
                body = _with_id(line, needle, record_id)
                if body is not None:
                    return body
        for line in self._years.lines():
            body = _with_id(line, needle, record_id)
            if body is not None:
                return body
        return None

    def _outcome_at(self, line: bytes, pos: int) -> OutcomeReflection | None:
        if OUTCOME_KIND.encode() not in line:
            if not _may_be_object(line):  # cheap: no record looks like this; say so once
                with self._mutex:
                    self._report_unread(line, pos, _why_not_record(_load(line)))
            return None  # most lines are attempt reflections
        obj = _load(line)
        if not _is_ours(obj):
            if type(obj) is not dict:
                with self._mutex:
                    self._report_unread(line, pos, _why_not_record(obj))
            return None
        try:
            from reflection.outcome import OutcomeReflection

            return OutcomeReflection.model_validate(obj)
        except ValidationError as exc:
            with self._mutex:
                self._report_invalid(line, pos, exc)
            return None


class YearlyArchive:
    """`<memory>/archive/reflections-<year>.jsonl`: where records that leave the file go,
    by the year they were created."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def paths(self) -> list[Path]:
        """The yearly files, oldest year first."""
        return sorted(self.folder.glob("reflections-*.jsonl"))

    def append(self, lines: list[bytes]) -> None:
        """Each line to its year's file, appended and fsynced."""
        by_year: dict[int, list[bytes]] = {}
        for line in lines:
            by_year.setdefault(_year_of(orjson.loads(line)), []).append(line)
        for year, batch in sorted(by_year.items()):
            _append_durably(self.folder / f"reflections-{year}.jsonl", batch)

    def lines(self) -> Iterator[bytes]:
        for path in self.paths():
            yield from (_read_whole(path) or b"").splitlines()

    def outcomes(self) -> list[OutcomeReflection]:
        """Its outcome records, each id once, oldest year first."""
        from reflection.outcome import OutcomeReflection

        found: dict[str, OutcomeReflection] = {}
        for line in self.lines():
            obj = _load(line)
            if _is_ours(obj):
                try:
                    record = OutcomeReflection.model_validate(obj)
                except ValidationError:
                    continue
                found.setdefault(record.id, record)
        return list(found.values())


def _raw_lines(path: Path, *, archived: bool) -> Iterator[tuple[dict[str, Any] | None, bool]]:
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return
    with handle:
        for line in handle:
            if line.strip():
                obj = _load(line)
                yield (obj if record_kind(obj) else None), archived


def _with_id(line: bytes, needle: bytes, record_id: str) -> dict[str, Any] | None:
    if needle not in line:
        return None  # cheap: most lines are other records
    obj = _load(line)
    return obj if type(obj) is dict and obj.get("id") == record_id else None
