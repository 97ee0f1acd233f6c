"""LessonIndex: the lessons of `reflections.jsonl`, searchable offline in milliseconds.

The JSONL files are the source of truth; `<memory_dir>/lessons.sqlite` is a derived
cache that any process may delete. It holds:

- `lessons`: one row per lesson (its JSON body, the text it is searched by, an optional
  embedding), with an FTS5 index over the text, ranked with bm25();
- `lesson_keys`: the lesson's files, file names, error signature, task type and labels,
  so that a lesson about the same file or error is a candidate even without shared words;
- `uses`: how often each lesson was shown to an attempt and how often that attempt
  passed, summed from `lesson-uses.jsonl`;
- `meta`: per source file, its (dev, inode), the byte offset consumed and the bytes just
  before it.

Syncing reads only complete lines appended since the offset. A database that has read
nothing yet starts from the file's retention mark when it has a valid one (a fresh clone
of a committed memory): the outcome lines the mark points at, then the file from the
mark's end. If the file was replaced
(another inode), shrank, or the bytes before the offset changed (rewritten in place), that
source is re-read from the start. A database that is corrupt, unreadable or of another
schema version is deleted and rebuilt. Writes happen in short `BEGIN IMMEDIATE`
transactions, one per chunk of lines, so that several processes can share the cache.

Ranking takes candidates from FTS5 (the best ~200 by bm25) and from the key table (the
newest ~50 per key), then scores them in Python with `reflection.lessons.score_lesson`.
bm25 scores every row an OR-query matches, so the query keeps only its rarest words,
within a budget of rows (see `_selective_terms`): a word found in most lessons would
cost a scan of the table and weighs next to nothing in bm25 anyway.
"""

from __future__ import annotations

import fcntl
import logging
import math
import os
import re
import sqlite3
import threading
from array import array
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import orjson

from reflection.fileio import open_for_reading
from reflection.lessons import (
    USES,
    Lesson,
    LessonQuery,
    RankedLesson,
    basename,
    best_lessons,
    normal_path,
    score_lesson,
)

log = logging.getLogger("goldenloop.lessons")

Embedder = Callable[[list[str]], list[list[float]]]
T = TypeVar("T")

REFLECTIONS = "reflections.jsonl"
DATABASE = "lessons.sqlite"
SCHEMA_VERSION = "2"  # 2: lessons carry the tools they name and their steps

FTS_CANDIDATES = 200
KEY_CANDIDATES = 50  # per key: a common task type must not flood the scorer
MAX_TERMS = 32
PROBE_CAP = 2000  # a word in more lessons than this is too common to rank by (see _selective_terms)
POSTING_BUDGET = 8000  # rows bm25 may score per query
CHUNK_BYTES = 4 << 20  # lines per write transaction, roughly
TAIL_BYTES = 64  # compared before reading on: detects a file rewritten in place
EMBED_BATCH = 64
BUSY_TIMEOUT_S = 30.0

STOPWORDS = frozenset(
    """the and for with that this from into when then than are was were been being have has had not
    but all any can could should would will shall may might must its it's our your their there here
    what which who whom whose why how use used using also only just more most some such each other
    very too does did done make made get got out off over under again once about after before
    while where them they you she him her his hers ours yours theirs these those because instead""".split()
)
_WORD = re.compile(r"[^\W_]+")

SCHEMA = f"""
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO meta VALUES ('schema', '{SCHEMA_VERSION}');
CREATE TABLE lessons(
    seq INTEGER PRIMARY KEY,
    lesson_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    body BLOB NOT NULL,
    search TEXT NOT NULL,
    vector BLOB
);
CREATE INDEX lessons_by_id ON lessons(lesson_id);
CREATE INDEX lessons_by_task ON lessons(task_id);
CREATE VIRTUAL TABLE lesson_text USING fts5(
    search, content='lessons', content_rowid='seq', tokenize='porter unicode61'
);
CREATE TABLE lesson_keys(key TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (key, seq)) WITHOUT ROWID;
CREATE INDEX keys_by_seq ON lesson_keys(seq);
CREATE TABLE uses(lesson_id TEXT PRIMARY KEY, shown INTEGER NOT NULL, helped INTEGER NOT NULL);
"""


def use_line(lesson_id: str, task_id: str, attempt: int, passed: bool, at: datetime) -> bytes:
    """One line of the uses file: a lesson shown to an attempt, and whether that passed."""
    when = at.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return orjson.dumps({"lessonId": lesson_id, "taskId": task_id, "attempt": attempt, "passed": passed,
                         "at": when}) + b"\n"


class SchemaMismatch(Exception):
    """The database was written by another version of this module."""


def is_corrupt(exc: Exception) -> bool:
    """A database we should throw away, as opposed to one that is merely busy."""
    if isinstance(exc, SchemaMismatch):
        return True
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, sqlite3.DatabaseError) and code is not None and code & 0xFF in (
        sqlite3.SQLITE_CORRUPT,
        sqlite3.SQLITE_NOTADB,
    )


def query_terms(text: str) -> list[str]:
    """Distinct lowercase words of 3+ characters, stopwords dropped, at most MAX_TERMS."""
    terms = dict.fromkeys(w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in STOPWORDS)
    return list(terms)[:MAX_TERMS]


def fts_expression(terms: Iterable[str]) -> str:
    """An FTS5 query matching any term; each is quoted so no word is read as an operator."""
    return " OR ".join(f'"{term}"' for term in terms)


def lesson_keys(lesson: Lesson) -> set[str]:
    keys = {f"f:{normal_path(f)}" for f in lesson.files} | {f"b:{basename(f)}" for f in lesson.files}
    keys |= {f"l:{label.lower()}" for label in lesson.labels}
    if lesson.error_signature:
        keys.add(f"s:{lesson.error_signature}")
    if lesson.task_type:
        keys.add(f"t:{lesson.task_type.lower()}")
    return keys | {f"k:{tool}" for tool in lesson.tools}


def query_keys(query: LessonQuery) -> set[str]:
    keys = {f"f:{normal_path(f)}" for f in query.files} | {f"b:{basename(f)}" for f in query.files}
    keys |= {f"l:{label.lower()}" for label in query.labels}
    keys |= {f"s:{sig}" for sig in query.error_signatures if sig}
    if query.task_type:
        keys.add(f"t:{query.task_type.lower()}")
    return keys | {f"k:{tool}" for tool in query.tools or ()}


def unit_vector(values: list[float]) -> bytes:
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return array("f", (v / norm for v in values)).tobytes()


def cosine(unit_a: array, blob_b: bytes) -> float:
    """Cosine of two unit vectors; 0 when their sizes differ (another embedder wrote one)."""
    unit_b = array("f")
    unit_b.frombytes(blob_b)
    if len(unit_a) != len(unit_b):
        return 0.0
    return math.fsum(a * b for a, b in zip(unit_a, unit_b, strict=True))


@dataclass
class SourceState:
    """How far one JSONL file has been read into the database."""

    dev: int = 0
    ino: int = 0
    offset: int = 0
    tail: bytes = b""

    def encode(self) -> str:
        return orjson.dumps([self.dev, self.ino, self.offset, self.tail.hex()]).decode()

    @classmethod
    def decode(cls, text: str | None) -> SourceState:
        if not text:
            return cls()
        dev, ino, offset, tail = orjson.loads(text)
        return cls(dev, ino, offset, bytes.fromhex(tail))


@dataclass
class Appended:
    """Complete lines a file gained since a state, and whether it must be read from scratch."""

    data: bytes  # whole lines, each ending in "\n"
    state: SourceState
    restart: bool
    more: bool  # a chunk limit stopped the read


def read_appended(path: Path, state: SourceState) -> Appended:
    fd = open_for_reading(path)  # a folder or FIFO there is a MemoryFileError, not a hang
    if fd is None:
        empty = SourceState()
        return Appended(b"", empty, restart=state != empty, more=False)
    try:
        return _read_from(fd, state)
    finally:
        os.close(fd)


def _read_from(fd: int, state: SourceState) -> Appended:
    st = os.fstat(fd)
    same = (st.st_dev, st.st_ino) == (state.dev, state.ino) and st.st_size >= state.offset
    if same and state.tail:
        same = os.pread(fd, len(state.tail), state.offset - len(state.tail)) == state.tail
    start = state if same else SourceState(st.st_dev, st.st_ino)
    data = b""
    while start.offset + len(data) < st.st_size:
        piece = os.pread(fd, CHUNK_BYTES, start.offset + len(data))
        data += piece
        if not piece or b"\n" in piece:  # at least one complete line: stop at the chunk
            break
    end = data.rfind(b"\n") + 1  # a last line without "\n" may be a write in progress
    consumed = data[:end]
    new_state = SourceState(st.st_dev, st.st_ino, start.offset + end, (start.tail + consumed)[-TAIL_BYTES:])
    more = new_state.offset < st.st_size and end > 0
    return Appended(consumed, new_state, restart=not same, more=more)


# Lessons are the outcome reflections, one per task that ended (they sum up its attempts);
# attempt reflections serve their own subtask's retries and may number millions, so their
# lines are not even parsed here.
_OUTCOME_LINE = re.compile(rb'"kind"\s*:\s*"outcome"')


def outcome_lines(data: bytes) -> Iterator[bytes]:
    """The lines of `data` that may be outcome records, found by one search over the bytes
    (a fresh clone's first sync reads the whole file: no split into a million lines)."""
    end = 0
    for hit in _OUTCOME_LINE.finditer(data):
        if hit.start() < end:
            continue  # a second match on a line already given
        start = data.rfind(b"\n", 0, hit.start()) + 1
        end = data.find(b"\n", hit.end())
        end = len(data) if end < 0 else end
        yield data[start:end]


def parse_lines(lines: Iterable[bytes]) -> Iterator[object]:
    for line in lines:
        try:
            yield orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # torn or foreign: the JSONL belongs to several tools


def _marked_outcome_lines(path: Path) -> tuple[bytes, SourceState] | None:
    """The outcome lines a valid retention mark of `path` points at, and the state of
    having read the file up to the mark's end; None without such a mark."""
    from reflection.retention_mark import mark_path, read_mark, still_describes

    mark = read_mark(mark_path(path))
    if mark is None or mark.outcome_spans is None:
        return None
    fd = open_for_reading(path)
    if fd is None:
        return None
    try:
        st = os.fstat(fd)
        if not still_describes(fd, st.st_size, mark):
            return None
        lines = b"".join(os.pread(fd, end - start, start) + b"\n" for start, end in mark.outcome_spans)
        before = min(TAIL_BYTES, mark.size)
        tail = os.pread(fd, before, mark.size - before)
    finally:
        os.close(fd)
    return lines, SourceState(st.st_dev, st.st_ino, mark.size, tail)


class LessonIndex:
    """Ranks the lessons in `<memory_dir>/reflections.jsonl`; see the module docstring."""

    def __init__(self, memory_dir: Path, *, embedder: Embedder | None = None) -> None:
        self.memory_dir = Path(memory_dir)
        self.embedder = embedder
        self.db_path = self.memory_dir / DATABASE
        self._conn: sqlite3.Connection | None = None
        self._mutex = threading.RLock()  # one connection, shared by the threads of a process

    # -- the database ---------------------------------------------------------------

    def close(self) -> None:
        with self._mutex:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> LessonIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self.memory_dir.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.db_path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            try:
                self._prepare(conn)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    @staticmethod
    def _prepare(conn: sqlite3.Connection) -> None:
        conn.execute("PRAGMA journal_mode=WAL")  # readers never wait for a writer
        conn.execute("PRAGMA synchronous=NORMAL")  # a cache: losing the last commit is fine
        with _immediate(conn):  # two processes may both find an empty file: one creates the tables
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if not tables:
                for statement in SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                return
        version = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone() if "meta" in tables else None
        if version is None or version[0] != SCHEMA_VERSION:
            raise SchemaMismatch(str(version))

    def _discard_database(self) -> None:
        log.warning("lesson index %s is unreadable; rebuilding it from the JSONL files", self.db_path)
        self.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.db_path}{suffix}").unlink(missing_ok=True)

    def _guarded(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work`; a corrupt database is deleted and `work` runs once more on a fresh one."""
        with self._mutex:
            try:
                return work(self._connection())
            except (sqlite3.DatabaseError, SchemaMismatch) as exc:
                if not is_corrupt(exc):
                    raise
            self._discard_database()
            return work(self._connection())

    # -- syncing --------------------------------------------------------------------

    def sync(self) -> None:
        """Bring the database up to date with both JSONL files (only what was appended)."""
        self._guarded(self._sync_all)

    def _sync_all(self, conn: sqlite3.Connection) -> None:
        self._start_from_mark(conn, self.memory_dir / REFLECTIONS)
        self._follow(conn, self.memory_dir / REFLECTIONS, "source:lessons", self._reset_lessons, self._add_lessons)
        self._follow(conn, self.memory_dir / USES, "source:uses", self._reset_uses, self._add_uses)
        if self.embedder is not None:
            self._embed_missing(conn, self.embedder)

    @staticmethod
    def _follow(
        conn: sqlite3.Connection,
        path: Path,
        key: str,
        reset: Callable[[sqlite3.Connection], None],
        add: Callable[[sqlite3.Connection, bytes], None],
    ) -> None:
        while True:
            with _immediate(conn):  # state read and advanced under one write lock
                row = conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
                state = SourceState.decode(row[0] if row else None)
                appended = read_appended(path, state)
                if appended.restart:
                    reset(conn)
                if appended.data:
                    add(conn, appended.data)
                if appended.state != state:
                    conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, appended.state.encode()))
            if not appended.more:
                return

    def _start_from_mark(self, conn: sqlite3.Connection, path: Path) -> None:
        """A database that has read nothing yet (a fresh clone, a deleted cache) whose file
        has a valid retention mark (reflection/retention_mark.py) reads the outcome lines
        the mark points at, then follows the file from the mark's end as usual."""
        started = "SELECT 1 FROM meta WHERE key='source:lessons'"
        if conn.execute(started).fetchone() is not None:
            return  # the usual case, without taking the write lock
        with _immediate(conn):
            if conn.execute(started).fetchone() is not None:
                return
            found = _marked_outcome_lines(path)
            if found is not None:
                lines, state = found
                self._add_lessons(conn, lines)
                conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", ("source:lessons", state.encode()))

    @staticmethod
    def _reset_lessons(conn: sqlite3.Connection) -> None:
        conn.execute("DELETE FROM lesson_keys")
        conn.execute("DELETE FROM lessons")
        conn.execute("INSERT INTO lesson_text(lesson_text) VALUES ('delete-all')")

    @staticmethod
    def _reset_uses(conn: sqlite3.Connection) -> None:
        conn.execute("DELETE FROM uses")

    def _add_lessons(self, conn: sqlite3.Connection, data: bytes) -> None:
        for obj in parse_lines(outcome_lines(data)):
            lesson = Lesson.from_record(obj)
            if lesson is not None:
                self._add_lesson(conn, lesson)

    @staticmethod
    def _add_lesson(conn: sqlite3.Connection, lesson: Lesson) -> None:
        for seq, search in conn.execute("SELECT seq, search FROM lessons WHERE lesson_id=?", (lesson.id,)).fetchall():
            # the same id again (a record rewritten by its tool): the newer one wins
            conn.execute("INSERT INTO lesson_text(lesson_text, rowid, search) VALUES ('delete', ?, ?)", (seq, search))
            conn.execute("DELETE FROM lesson_keys WHERE seq=?", (seq,))
            conn.execute("DELETE FROM lessons WHERE seq=?", (seq,))
        search = lesson.search_text
        cursor = conn.execute(
            "INSERT INTO lessons(lesson_id, task_id, body, search) VALUES (?, ?, ?, ?)",
            (lesson.id, lesson.task_id, lesson.to_json(), search),
        )
        seq = cursor.lastrowid
        conn.execute("INSERT INTO lesson_text(rowid, search) VALUES (?, ?)", (seq, search))
        conn.executemany("INSERT OR IGNORE INTO lesson_keys VALUES (?, ?)", [(k, seq) for k in lesson_keys(lesson)])

    @staticmethod
    def _add_uses(conn: sqlite3.Connection, data: bytes) -> None:
        rows = [
            (obj["lessonId"], int(obj.get("passed") is True))
            for obj in parse_lines(data.splitlines())
            if isinstance(obj, dict) and isinstance(obj.get("lessonId"), str)
        ]
        conn.executemany(
            "INSERT INTO uses VALUES (?, 1, ?) ON CONFLICT(lesson_id) DO UPDATE"
            " SET shown = shown + 1, helped = helped + excluded.helped",
            rows,
        )

    @staticmethod
    def _embed_missing(conn: sqlite3.Connection, embedder: Embedder) -> None:
        """Embed lessons that have no vector yet, outside any transaction (an embedder may be slow)."""
        while True:
            rows = conn.execute("SELECT seq, search FROM lessons WHERE vector IS NULL LIMIT ?", (EMBED_BATCH,))
            batch = rows.fetchall()
            if not batch:
                return
            vectors = embedder([search for _, search in batch])
            with _immediate(conn):
                conn.executemany(
                    "UPDATE lessons SET vector=? WHERE seq=?",
                    [(unit_vector(v), seq) for (seq, _), v in zip(batch, vectors, strict=True)],
                )

    # -- ranking --------------------------------------------------------------------

    def rank(self, query: LessonQuery, limit: int = 3) -> list[RankedLesson]:
        """The `limit` lessons that best fit `query`, best first; never the excluded task's."""
        self.sync()
        return self._guarded(lambda conn: self._rank(conn, query, limit))

    def search(self, text: str, limit: int = 10) -> list[RankedLesson]:
        """The same ranking for a free-text query (the `memory search` command)."""
        return self.rank(LessonQuery(text=text, by_person=True), limit)

    def _rank(self, conn: sqlite3.Connection, query: LessonQuery, limit: int) -> list[RankedLesson]:
        similarity = self._text_similarity(conn, query)
        seqs = set(similarity) | self._key_candidates(conn, query)
        if not seqs:
            return []
        lessons = _load_lessons(conn, seqs)
        uses = self._uses_of(conn, [lesson.id for lesson in lessons.values()])
        now = datetime.now(UTC)
        ranked: list[RankedLesson] = []
        for seq, lesson in lessons.items():
            shown, helped = uses.get(lesson.id, (0, 0))
            scored = score_lesson(lesson, query, similarity.get(seq, 0.0), shown=shown, helped=helped, now=now,
                                  lexical=self.embedder is None)
            if scored is not None:
                ranked.append(scored)
        return best_lessons(ranked, limit)

    def _text_similarity(self, conn: sqlite3.Connection, query: LessonQuery) -> dict[int, float]:
        """Candidate lessons by text, each with a similarity in [0, 1]."""
        if self.embedder is not None:
            return self._cosine_candidates(conn, query, self.embedder)
        rows = _bm25_candidates(conn, query_terms(query.text), query.exclude_task_id)
        best = max((score for _, score in rows), default=0.0)
        # bm25 has no upper bound: relative to the best candidate it becomes a share in [0, 1]
        return {seq: score / best for seq, score in rows} if best > 0 else {}

    @staticmethod
    def _cosine_candidates(conn: sqlite3.Connection, query: LessonQuery, embedder: Embedder) -> dict[int, float]:
        # A linear scan in pure Python: meant for thousands of lessons, not millions.
        if not query.text.strip():
            return {}
        wanted = array("f")
        wanted.frombytes(unit_vector(embedder([query.text])[0]))
        rows = conn.execute(
            "SELECT seq, vector FROM lessons WHERE vector IS NOT NULL AND task_id IS NOT ?", (query.exclude_task_id,)
        )
        scores = {seq: cosine(wanted, blob) for seq, blob in rows}
        positive = sorted(((s, seq) for seq, s in scores.items() if s > 0), reverse=True)[:FTS_CANDIDATES]
        return {seq: s for s, seq in positive}

    @staticmethod
    def _key_candidates(conn: sqlite3.Connection, query: LessonQuery) -> set[int]:
        found: set[int] = set()
        for key in query_keys(query):
            rows = conn.execute(
                "SELECT seq FROM lesson_keys WHERE key=?"
                " AND seq NOT IN (SELECT seq FROM lessons WHERE task_id = ?) ORDER BY seq DESC LIMIT ?",
                (key, query.exclude_task_id, KEY_CANDIDATES),
            )
            found.update(seq for (seq,) in rows)
        return found

    @staticmethod
    def _uses_of(conn: sqlite3.Connection, lesson_ids: list[str]) -> dict[str, tuple[int, int]]:
        rows = conn.execute(
            "SELECT lesson_id, shown, helped FROM uses WHERE lesson_id IN (SELECT value FROM json_each(?))",
            (orjson.dumps(lesson_ids).decode(),),
        )
        return {lesson_id: (shown, helped) for lesson_id, shown, helped in rows}

    # -- uses -----------------------------------------------------------------------

    def record_use(self, lesson_ids: Iterable[str], *, task_id: str, attempt: int, passed: bool) -> None:
        """Note that these lessons were shown to an attempt, and whether it passed."""
        at = datetime.now(UTC)
        lines = [use_line(lid, task_id, attempt, passed, at) for lid in dict.fromkeys(lesson_ids)]
        if lines:
            append_lines(self.memory_dir / USES, lines)

    def usefulness(self, lesson_id: str) -> tuple[int, int]:
        """(shown, helped): how often the lesson was shown, and how often that attempt passed."""
        self.sync()
        return self._guarded(lambda conn: self._uses_of(conn, [lesson_id]).get(lesson_id, (0, 0)))

    def proven(self, min_helped: int) -> list[tuple[Lesson, int, int]]:
        """(lesson, shown, helped) for every lesson followed by at least `min_helped` passes."""
        self.sync()
        query = (
            "SELECT l.body, u.shown, u.helped FROM uses u JOIN lessons l ON l.lesson_id = u.lesson_id"
            " WHERE u.helped >= ? ORDER BY l.seq"
        )
        rows = self._guarded(lambda conn: conn.execute(query, (min_helped,)).fetchall())
        return [(Lesson.from_json(body), shown, helped) for body, shown, helped in rows]

    def has_uses(self) -> bool:
        """A lesson was shown at least once (`lesson-uses.jsonl` exists)."""
        return (self.memory_dir / USES).exists()

    # -- reading --------------------------------------------------------------------

    def lessons(self) -> list[Lesson]:
        """Every lesson, in file order."""
        self.sync()
        rows = self._guarded(lambda conn: conn.execute("SELECT body FROM lessons ORDER BY seq").fetchall())
        return [Lesson.from_json(body) for (body,) in rows]

    def get(self, lesson_id: str) -> Lesson | None:
        self.sync()
        sql = "SELECT body FROM lessons WHERE lesson_id=? ORDER BY seq DESC LIMIT 1"
        row = self._guarded(lambda conn: conn.execute(sql, (lesson_id,)).fetchone())
        return Lesson.from_json(row[0]) if row else None


def _load_lessons(conn: sqlite3.Connection, seqs: Iterable[int]) -> dict[int, Lesson]:
    rows = conn.execute(
        "SELECT seq, body FROM lessons WHERE seq IN (SELECT value FROM json_each(?))",
        (orjson.dumps(list(seqs)).decode(),),
    )
    return {seq: Lesson.from_json(body) for seq, body in rows}


def _selective_terms(conn: sqlite3.Connection, terms: list[str]) -> tuple[list[str], list[str]]:
    """(the rarest terms within POSTING_BUDGET, every term that occurs, rarest first).

    bm25 costs time in proportion to the rows it scores: an OR of a few words found in
    most lessons would score the whole table. Each term's count is probed with a LIMIT,
    so a common word costs at most PROBE_CAP rows; it carries little weight in bm25 anyway.
    """
    counts: dict[str, int] = {}
    for term in terms:
        row = conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM lesson_text WHERE lesson_text MATCH ? LIMIT ?)",
            (fts_expression([term]), PROBE_CAP + 1),
        ).fetchone()
        if row[0]:
            counts[term] = row[0]
    present = sorted(counts, key=counts.__getitem__)
    chosen: list[str] = []
    total = 0
    for term in present:
        if counts[term] > PROBE_CAP or total + counts[term] > POSTING_BUDGET:
            break
        chosen.append(term)
        total += counts[term]
    return chosen, present


def _bm25_candidates(
    conn: sqlite3.Connection, terms: list[str], exclude_task_id: str | None
) -> list[tuple[int, float]]:
    """(seq, -bm25) of up to FTS_CANDIDATES lessons: the best by bm25 over the selective terms.

    When every word is common, the newest lessons holding all of the rarest few (else
    the rarest one) are taken instead, so the cost stays bounded.
    """
    chosen, present = _selective_terms(conn, terms)
    select = (
        "SELECT rowid, -bm25(lesson_text) FROM lesson_text WHERE lesson_text MATCH ?"
        " AND rowid NOT IN (SELECT seq FROM lessons WHERE task_id = ?)"
    )
    if chosen:
        sql = f"{select} ORDER BY rank LIMIT ?"
        return conn.execute(sql, (fts_expression(chosen), exclude_task_id, FTS_CANDIDATES)).fetchall()
    sql = f"{select} ORDER BY rowid DESC LIMIT ?"
    for expression in (" AND ".join(f'"{t}"' for t in present[:4]), fts_expression(present[:1])):
        rows = conn.execute(sql, (expression, exclude_task_id, FTS_CANDIDATES)).fetchall() if expression else []
        if rows:
            return rows
    return []


@contextmanager
def _immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """One short write transaction, taking the write lock before anything is read."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            with suppress(sqlite3.Error):  # on a corrupt file this fails too: report the first error
                conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def append_lines(path: Path, lines: list[bytes]) -> None:
    """Append each line with one O_APPEND write, under an flock on `<path>.lock`.

    A torn last line left by a killed writer gets a "\\n" first, so ours starts clean.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size and _last_byte(path, size) != b"\n":
                lines = [b"\n" + lines[0], *lines[1:]]
            for line in lines:
                os.write(fd, line)
        finally:
            os.close(fd)
    finally:
        os.close(lock_fd)  # closing releases the flock


def _last_byte(path: Path, size: int) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(size - 1)
        return handle.read(1)
