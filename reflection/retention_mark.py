"""Is any retention due? A watermark answers without reading the whole memory.

Retention (`reflection.retention`, `JsonlReflectionStore.prune`) needs two facts about
`reflections.jsonl`: the oldest live attempt reflection, and how many live outcome records
each agent has. `<memory>/reflections.jsonl.retention` keeps both for the file's first
`size` bytes, with sha256 digests of the bytes at the file's start and just before
`size`. The file is append-only, so when both digests still match, only the lines after
`size` need reading; when either differs (the file was rewritten, shortened or edited),
or the mark is missing or unreadable, the whole file is read once more. Checking costs
two 64 KiB reads whatever the file's size.

The mark travels with the file: a team that commits its memory commits both
(`git add -f .openagents/memory/reflections.jsonl*`), so a fresh clone reads only
what was appended after the mark was written. A mark that lies about bytes it does not
hash (an edit in the middle of the file that keeps its size and both windows) can only
defer a retention pass: records are moved by the pass itself, which reads every line.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

import orjson

from reflection.fileio import open_for_reading
from reflection.store import ATTEMPT_KIND, record_created_at, record_kind

MARK_SUFFIX = ".retention"
WINDOW = 64 << 10  # bytes hashed at each end
CHUNK = 8 << 20
VERSION = 2
MAX_SPANS = 20_000  # outcome lines whose places the mark keeps; beyond that, none
# The lines the lesson index reads (reflection/lesson_index.py): outcome records.
OUTCOME_LINE = re.compile(rb'"kind"\s*:\s*"outcome"')


@dataclass(frozen=True)
class RetentionMark:
    """What retention needs to know of a file's first `size` bytes."""

    size: int = 0
    head: str = ""
    tail: str = ""
    oldest_attempt: float | None = None  # createdAt of the oldest live attempt, epoch seconds
    outcomes: dict[str, int] = field(default_factory=dict)  # live outcome records per agent
    pruned_at: float = 0.0  # when a retention pass last ran over this memory
    # (start, end) of each line that may be an outcome record, so that a fresh clone's
    # lesson index reads those lines and not the whole file; None when there are too many.
    outcome_spans: tuple[tuple[int, int], ...] | None = ()

    def due(self, cutoff: datetime, keep_per_agent: int) -> bool:
        """Would a pass move anything: an attempt older than cutoff, an agent over its keep?"""
        old = self.oldest_attempt is not None and self.oldest_attempt < cutoff.timestamp()
        return old or any(count > max(keep_per_agent, 0) for count in self.outcomes.values())

    def to_json(self) -> bytes:
        return orjson.dumps({"version": VERSION, "size": self.size, "head": self.head, "tail": self.tail,
                             "oldestAttempt": self.oldest_attempt, "outcomes": self.outcomes,
                             "prunedAt": self.pruned_at,
                             "outcomeSpans": None if self.outcome_spans is None else list(self.outcome_spans)})


def mark_path(reflections: Path) -> Path:
    return reflections.with_name(reflections.name + MARK_SUFFIX)


def read_mark(path: Path) -> RetentionMark | None:
    """The mark at path; None when missing or not one this version wrote."""
    try:
        obj = orjson.loads(path.read_bytes())
        if obj.get("version") != VERSION:
            return None
        oldest, spans = obj["oldestAttempt"], obj["outcomeSpans"]
        return RetentionMark(int(obj["size"]), str(obj["head"]), str(obj["tail"]),
                             None if oldest is None else float(oldest),
                             {str(k): int(v) for k, v in obj["outcomes"].items()}, float(obj["prunedAt"]),
                             None if spans is None else tuple((int(a), int(b)) for a, b in spans))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def write_mark(path: Path, mark: RetentionMark) -> None:
    """Replace the mark (a cache: a lost write costs one full read later, so no fsync)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(mark.to_json())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def brought_up_to_date(reflections: Path, mark: RetentionMark | None) -> RetentionMark | None:
    """The mark for the file as it is now: from `mark` plus the lines appended since,
    when `mark` still describes the file's start; from the whole file otherwise. None
    when there is no file."""
    fd = open_for_reading(reflections)
    if fd is None:
        return None
    try:
        size = os.fstat(fd).st_size
        if mark is None or not still_describes(fd, size, mark):
            mark = RetentionMark(pruned_at=mark.pruned_at if mark is not None else 0.0)
        return _read_on(fd, size, mark)
    finally:
        os.close(fd)


def _digest(fd: int, start: int, end: int) -> str:
    return hashlib.sha256(os.pread(fd, max(end - start, 0), start)).hexdigest()


def still_describes(fd: int, size: int, mark: RetentionMark) -> bool:
    """Whether the file open at fd (of `size` bytes) starts with what `mark` describes."""
    if mark.size > size:
        return False
    return (_digest(fd, 0, min(WINDOW, mark.size)) == mark.head
            and _digest(fd, max(mark.size - WINDOW, 0), mark.size) == mark.tail)


def _read_on(fd: int, size: int, mark: RetentionMark) -> RetentionMark:
    oldest, outcomes, end = mark.oldest_attempt, dict(mark.outcomes), mark.size
    spans = None if mark.outcome_spans is None else list(mark.outcome_spans)
    for line_end, line in _complete_lines(fd, mark.size, size):
        end = line_end
        if spans is not None and OUTCOME_LINE.search(line):
            if len(spans) >= MAX_SPANS:
                spans = None
            else:
                spans.append((line_end - len(line) - 1, line_end - 1))
        obj = _load(line)
        kind = record_kind(obj) if obj is not None else None
        if kind == ATTEMPT_KIND:
            created = record_created_at(obj)
            if created is not None and (oldest is None or created.timestamp() < oldest):
                oldest = created.timestamp()
        elif kind is not None and isinstance(obj.get("agent"), str):
            outcomes[obj["agent"]] = outcomes.get(obj["agent"], 0) + 1
    return replace(mark, size=end, head=_digest(fd, 0, min(WINDOW, end)),
                   tail=_digest(fd, max(end - WINDOW, 0), end), oldest_attempt=oldest, outcomes=outcomes,
                   outcome_spans=None if spans is None else tuple(spans))


def _complete_lines(fd: int, start: int, size: int) -> Iterator[tuple[int, bytes]]:
    """(offset after the line, line) for every `\\n`-terminated line in [start, size)."""
    pos, rest = start, b""
    while pos < size:
        piece = os.pread(fd, min(CHUNK, size - pos), pos)
        if not piece:
            return
        data, base = rest + piece, pos - len(rest)
        pos += len(piece)
        cut = data.rfind(b"\n") + 1
        offset = base
        for line in data[:cut].split(b"\n")[:-1]:
            offset += len(line) + 1
            yield offset, line
        rest = data[cut:]


def _load(line: bytes) -> object:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
