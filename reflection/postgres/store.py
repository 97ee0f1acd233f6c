"""PostgresReflectionStore: the reflection store on a team's PostgreSQL database.

It behaves as the JSONL store does (tests/memory/ proves it with one conformance suite),
on tables that many repositories and machines share (reflection/postgres/schema.py):

- Appends are one `INSERT ... ON CONFLICT (project, id) DO NOTHING` through
  `Database.run`, which runs it again on a fresh connection while the server is away: a
  retry of an insert that did commit changes nothing, and an append that returned is
  committed (synchronous_commit is on for these connections). Appends from any number
  of processes are rows, never interleaved bytes.
- An outcome record and its lesson (`goldenloop_lessons`) are written in one transaction.
- Reads see only this store's project. `recent`, `iterate`, `count`, `outcomes` and
  `prune` each run on a partial index; `iterate` reads pages by `seq` (keyset), so
  millions of rows never sit in memory at once, and stops at the last row that existed
  when it started, as the JSONL store stops at the end the file had.
- Nothing is deleted: `prune` and `archive` set `archived_at`; `find` and
  `archived_outcomes` still see those rows.
- Every key a record was written with is kept (the body is JSONB). Values are validated
  into `Reflection` / `OutcomeReflection` when read; a row that fails validation is
  skipped and logged once per store.

`empty()` asks about the whole database, not only this project: a repository that joins
a team's memory learns from the team's lessons from its first task on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Iterable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from reflection.postgres.connection import safe_url
from reflection.postgres.lessons import add_lessons, drop_lessons
from reflection.postgres.schema import memory_database
from reflection.schema import Reflection
from reflection.store import ATTEMPT_KIND, OUTCOME_KIND, as_utc, describe_invalid, record_created_at, record_kind

if TYPE_CHECKING:
    import psycopg

    from reflection.outcome import OutcomeReflection

log = logging.getLogger("goldenloop.store")

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
PAGE = 1000  # rows per page of `iterate` and of the raw reads of a migration
NO_END = 2**63 - 1  # a seq above every seq

COLUMNS = "project, id, kind, subtask_id, task_id, agent, created_at, archived_at, body"
INSERT_SQL = (
    f"INSERT INTO goldenloop_reflections ({COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb)"
    " ON CONFLICT (project, id) DO NOTHING RETURNING seq"
)
INSERT_MANY_SQL = (
    f"INSERT INTO goldenloop_reflections ({COLUMNS})"
    " SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[],"
    " %s::timestamptz[], %s::timestamptz[], %s::jsonb[])"
    " ON CONFLICT (project, id) DO NOTHING RETURNING seq, id"
)
# The newest live attempts of one subtask, older than a seq: an index scan, backwards.
RECENT_SQL = (
    "SELECT seq, body::text FROM goldenloop_reflections"
    " WHERE project = %s AND subtask_id = %s AND kind = 'attempt' AND archived_at IS NULL AND seq < %s"
    " ORDER BY seq DESC LIMIT %s"
)
LIVE_PAGE_SQL = (
    "SELECT seq, body::text FROM goldenloop_reflections"
    " WHERE project = %s AND kind = %s AND archived_at IS NULL AND seq > %s AND seq <= %s"
    " ORDER BY seq LIMIT %s"
)
LAST_LIVE_SQL = (
    "SELECT max(seq) FROM goldenloop_reflections WHERE project = %s AND kind = %s AND archived_at IS NULL"
)
COUNT_SQL = (
    "SELECT count(*) FROM goldenloop_reflections WHERE project = %s AND kind = 'attempt' AND archived_at IS NULL"
)
ARCHIVED_SQL = (
    "SELECT seq, body::text FROM goldenloop_reflections"
    " WHERE project = %s AND kind = 'outcome' AND archived_at IS NOT NULL ORDER BY seq"
)
PRUNE_SQL = (
    "UPDATE goldenloop_reflections SET archived_at = now()"
    " WHERE project = %s AND kind = 'attempt' AND archived_at IS NULL AND created_at < %s"
)
ARCHIVE_SQL = (
    "UPDATE goldenloop_reflections SET archived_at = now()"
    " WHERE project = %s AND kind = 'outcome' AND archived_at IS NULL AND id = ANY(%s) RETURNING seq"
)
FIND_SQL = "SELECT body::text FROM goldenloop_reflections WHERE project = %s AND id = %s"
RAW_PAGE_SQL = (
    "SELECT seq, archived_at IS NOT NULL, body::text FROM goldenloop_reflections"
    " WHERE project = %s AND seq > %s ORDER BY seq LIMIT %s"
)


class PostgresReflectionStore:
    """The `ReflectionStore` of one project in a shared PostgreSQL database; see the module
    docstring. Thread-safe: its one connection is shared under a lock."""

    def __init__(self, url: str, *, project: str) -> None:
        self.project = project
        self.location = f"{safe_url(url)} (project {project})"
        self._db = memory_database(url)
        self._reported: set[int] = set()  # seqs of rows already logged as unreadable
        self._report_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"PostgresReflectionStore({self.location!r})"

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> PostgresReflectionStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- writing ----------------------------------------------------------------

    def append(self, reflection: Reflection) -> None:
        row = record_row(self.project, reflection.to_dict())
        self._db.run(lambda conn: conn.execute(INSERT_SQL, row))

    def append_outcome(self, record: OutcomeReflection) -> None:
        """The record and its lesson in one transaction."""
        row = record_row(self.project, record.to_dict())

        def insert(conn: psycopg.Connection) -> None:
            inserted = conn.execute(INSERT_SQL, row).fetchone()
            if inserted is not None:
                add_lessons(conn, self.project, [(inserted[0], orjson.loads(row[-1]))])

        self._db.transaction(insert)

    # -- reading ----------------------------------------------------------------

    def recent(self, subtask_id: str, limit: int = 3) -> list[Reflection]:
        if limit <= 0:
            return []
        found: list[Reflection] = []
        below = NO_END
        while len(found) < limit:
            wanted = limit - len(found)
            rows = self._db.run(
                lambda conn: conn.execute(RECENT_SQL, (self.project, subtask_id, below, wanted)).fetchall()
            )
            found.extend(self._valid(rows, Reflection))
            if len(rows) < wanted:
                break  # nothing older left
            below = rows[-1][0]
        return found

    def iterate(self) -> Iterator[Reflection]:
        for rows in self._live_pages(ATTEMPT_KIND):
            yield from self._valid(rows, Reflection)

    def count(self) -> int:
        """Live attempt rows, including any whose values fail validation (as the JSONL
        store counts such a line until a read meets it)."""
        return self._db.run(lambda conn: conn.execute(COUNT_SQL, (self.project,)).fetchone()[0])

    def empty(self) -> bool:
        """No record of any project in the database yet (see the module docstring)."""
        if self._db.knows("reflections held"):
            return False  # nothing is deleted: a memory once written stays so
        sql = "SELECT NOT EXISTS (SELECT 1 FROM goldenloop_reflections)"
        empty = self._db.run(lambda conn: conn.execute(sql).fetchone()[0])
        if not empty:
            self._db.remember("reflections held")
        return empty

    def outcomes(self) -> list[OutcomeReflection]:
        from reflection.outcome import OutcomeReflection

        return [record for rows in self._live_pages(OUTCOME_KIND) for record in self._valid(rows, OutcomeReflection)]

    def archived_outcomes(self) -> list[OutcomeReflection]:
        """Archived outcome rows, oldest first; `UNIQUE (project, id)` keeps each id once."""
        from reflection.outcome import OutcomeReflection

        rows = self._db.run(lambda conn: conn.execute(ARCHIVED_SQL, (self.project,)).fetchall())
        return self._valid(rows, OutcomeReflection)

    def find(self, record_id: str) -> dict[str, Any] | None:
        row = self._db.run(lambda conn: conn.execute(FIND_SQL, (self.project, record_id)).fetchone())
        return orjson.loads(row[0]) if row else None

    def _live_pages(self, kind: str) -> Iterator[list[tuple[int, str]]]:
        """The live rows of one kind in append order, a page at a time, up to the last row
        there was when the first page was asked for."""
        end = self._db.run(lambda conn: conn.execute(LAST_LIVE_SQL, (self.project, kind)).fetchone()[0])
        after = 0
        while end is not None and after < end:
            rows = self._db.run(
                lambda conn: conn.execute(LIVE_PAGE_SQL, (self.project, kind, after, end, PAGE)).fetchall()
            )
            if not rows:
                return
            yield rows
            after = rows[-1][0]

    def _valid(self, rows: Iterable[tuple[int, str]], model: type[M]) -> list[M]:
        """The rows that validate as `model`; the others are logged once and skipped."""
        found: list[M] = []
        for seq, body in rows:
            try:
                found.append(model.model_validate_json(body))
            except ValidationError as exc:
                self._report(seq, body, exc)
        return found

    def _report(self, seq: int, body: str, exc: ValidationError) -> None:
        with self._report_lock:
            if seq in self._reported:
                return
            self._reported.add(seq)
        record_id = orjson.loads(body).get("id")
        log.warning("%s: skipping the record %s (row %d): %s", self.location, record_id, seq, describe_invalid(exc))

    # -- moving records to the archive ------------------------------------------

    def prune(self, older_than: datetime) -> int:
        cutoff = as_utc(older_than)
        return self._db.run(lambda conn: conn.execute(PRUNE_SQL, (self.project, cutoff)).rowcount)

    def archive(self, ids: Collection[str]) -> int:
        """Archive these outcome rows and drop their lessons, in one transaction."""
        wanted = sorted(set(ids))
        if not wanted:
            return 0

        def move(conn: psycopg.Connection) -> int:
            seqs = [seq for (seq,) in conn.execute(ARCHIVE_SQL, (self.project, wanted)).fetchall()]
            drop_lessons(conn, seqs)
            return len(seqs)

        return self._db.transaction(move)

    # -- raw records, for copying a memory (reflection/migrate.py) ---------------

    def raw_records(self) -> Iterator[tuple[dict[str, Any], bool]]:
        """Every record of the project, live and archived, in append order: (body, archived)."""
        after = 0
        while True:
            rows = self._db.run(lambda conn: conn.execute(RAW_PAGE_SQL, (self.project, after, PAGE)).fetchall())
            for _, archived, body in rows:
                yield orjson.loads(body), archived
            if len(rows) < PAGE:
                return
            after = rows[-1][0]

    def add_raw(self, records: Iterable[tuple[dict[str, Any], bool]]) -> int:
        """Store every (body, archived) record, as it is, whose id the project does not
        hold yet, a transaction per page (each safe to run again after a restart); how
        many were new. Each body must be a record (`record_kind`)."""
        added = 0
        for page in batched(records, PAGE):
            added += self._db.transaction(lambda conn, page=page: self._insert_page(conn, page))
        return added

    def _insert_page(self, conn: psycopg.Connection, page: list[tuple[dict[str, Any], bool]]) -> int:
        rows = [record_row(self.project, body, archived=archived) for body, archived in page]
        columns = [list(column) for column in zip(*rows, strict=True)]
        inserted = conn.execute(INSERT_MANY_SQL, columns).fetchall()
        bodies = {row[1]: row for row in rows if row[2] == OUTCOME_KIND and row[7] is None}  # live outcomes
        add_lessons(conn, self.project, [(seq, orjson.loads(bodies[rid][-1])) for seq, rid in inserted if rid in bodies])
        return len(inserted)


def batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Lists of up to `size` items, in order."""
    page: list[T] = []
    for item in items:
        page.append(item)
        if len(page) == size:
            yield page
            page = []
    if page:
        yield page


def record_row(project: str, body: dict[str, Any], *, archived: bool = False) -> tuple[Any, ...]:
    """The values of one row of goldenloop_reflections (COLUMNS) for a record's body."""
    kind = record_kind(body)
    if kind is None:
        raise ValueError(f"not a reflection record: {str(body)[:80]}")
    text = orjson.dumps(body)
    if b"\\u0000" in text:  # orjson writes NUL only this way
        body = without_nul(body)
        text = orjson.dumps(body)
    return (
        project, body["id"], kind, _text(body.get("subtaskId")), _text(body.get("taskId")), _text(body.get("agent")),
        record_created_at(body), datetime.now(UTC) if archived else None, text.decode(),
    )


def without_nul(value: Any) -> Any:
    """`value` with NUL characters in its strings replaced by U+FFFD: PostgreSQL text and
    JSONB cannot hold NUL, and a tool's output may contain one."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_nul(item) for item in value]
    return value


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
