"""The memory's tables in PostgreSQL: reflections, the lessons derived from them, their uses.

Applied by `apply_schema(conn, COMPONENT, MIGRATIONS)` on every new connection of a store
or lesson index (cheap once done). One database serves many repositories: every row
carries the `project` key of the repository that wrote it.

- `goldenloop_reflections`: one row per record, attempt reflection or outcome record.
  `body` is the record as written, every key kept (unknown ones too), as JSONB; the
  columns beside it are copies of what the queries filter and order by. `seq` is the
  order of appends. `UNIQUE (project, id)` makes an append an `INSERT ... ON CONFLICT DO
  NOTHING`, so one retried after a server restart is never stored twice. Nothing is
  deleted: retention sets `archived_at`. Partial indexes keep each protocol call an index
  scan at millions of rows: `recent` (one subtask's newest live attempts), the live and
  the archived records of a project in append order (`iterate`, `count`, `outcomes`,
  `archived_outcomes`), and live attempts by age (`prune`).
- `goldenloop_lessons`: the lesson of each live outcome record (`Lesson.from_record`),
  written in the record's transaction and removed when the record is archived (it is
  derived data, as lessons.sqlite is for the JSONL files). Its search text has a
  generated `tsvector` with a GIN index, without GIN's pending list (`fastupdate =
  off`): a lesson is written once per task and searched on every subtask, and a pending
  list is scanned whole by every search until a vacuum merges it (3.5 ms instead of
  0.06 ms at 20,000 fresh lessons). `vector_dims` says which embedding sizes it has a
  vector of (see VECTOR_MIGRATIONS).
- `goldenloop_lesson_keys`: (key, lesson) for the files, file names, labels, error
  signature and task type of each lesson (`lesson_index.lesson_keys`). A B-tree, not a
  GIN array: ranking takes the newest few lessons per key, and a GIN index cannot hand
  out "the newest 50 with task type bug" without fetching every one of them.
- `goldenloop_lesson_uses`: each showing of a lesson to an attempt (the JSONL files'
  `lesson-uses.jsonl`): which project showed it, whose lesson it is, task, attempt,
  whether it passed, when. Unique on all of them, so a retried insert counts once.
- `goldenloop_lesson_counts`: (lesson, showing project) -> shown, helped; updated in the
  same transaction as the uses they sum. A lesson's usefulness is the sum over projects;
  the rules a project promotes are the ones that helped its own attempts.

Vectors (pgvector) are a component of their own, applied only by a lesson index with an
embedder: the extension may not be installed, and a team without an embedding model
should not need it. Each embedding size gets its own partial HNSW index, created when
that size is first seen (`vector_index_statements`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reflection.postgres.connection import (
    Database,
    PostgresUnavailable,
    apply_schema,
    first_line,
    learnt,
    psycopg_module,
    safe_url,
)

if TYPE_CHECKING:
    import psycopg

COMPONENT = "memory"
VECTOR_COMPONENT = "memory_vectors"
MAX_INDEXED_DIMS = 2000  # pgvector's HNSW limit for `vector`; larger embeddings are scanned

MIGRATIONS = [
    """
    CREATE TABLE goldenloop_reflections (
        seq bigserial PRIMARY KEY,
        project text NOT NULL,
        id text NOT NULL,
        kind text NOT NULL CHECK (kind IN ('attempt', 'outcome')),
        subtask_id text,
        task_id text,
        agent text,
        created_at timestamptz,
        archived_at timestamptz,
        body jsonb NOT NULL,
        UNIQUE (project, id)
    );
    CREATE INDEX goldenloop_reflections_recent ON goldenloop_reflections (project, subtask_id, seq)
        WHERE kind = 'attempt' AND archived_at IS NULL;
    CREATE INDEX goldenloop_reflections_live ON goldenloop_reflections (project, kind, seq)
        WHERE archived_at IS NULL;
    CREATE INDEX goldenloop_reflections_archived ON goldenloop_reflections (project, kind, seq)
        WHERE archived_at IS NOT NULL;
    CREATE INDEX goldenloop_reflections_aging ON goldenloop_reflections (project, created_at)
        WHERE kind = 'attempt' AND archived_at IS NULL;

    CREATE TABLE goldenloop_lessons (
        record_seq bigint PRIMARY KEY REFERENCES goldenloop_reflections (seq) ON DELETE CASCADE,
        project text NOT NULL,
        lesson_id text NOT NULL,
        task_id text NOT NULL,
        lesson text NOT NULL,
        search text NOT NULL,
        search_tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', search)) STORED,
        vector_dims integer[] NOT NULL DEFAULT '{}'
    );
    CREATE INDEX goldenloop_lessons_text ON goldenloop_lessons USING gin (search_tsv) WITH (fastupdate = off);
    CREATE INDEX goldenloop_lessons_by_id ON goldenloop_lessons (lesson_id, project);

    CREATE TABLE goldenloop_lesson_keys (
        key text NOT NULL,
        record_seq bigint NOT NULL REFERENCES goldenloop_lessons (record_seq) ON DELETE CASCADE,
        PRIMARY KEY (key, record_seq)
    );
    CREATE INDEX goldenloop_lesson_keys_by_lesson ON goldenloop_lesson_keys (record_seq);

    CREATE TABLE goldenloop_lesson_uses (
        seq bigserial PRIMARY KEY,
        project text NOT NULL,
        lesson_project text NOT NULL,
        lesson_id text NOT NULL,
        task_id text NOT NULL,
        attempt integer NOT NULL,
        passed boolean NOT NULL,
        at timestamptz NOT NULL,
        UNIQUE (project, lesson_project, lesson_id, task_id, attempt, at)
    );

    CREATE TABLE goldenloop_lesson_counts (
        lesson_project text NOT NULL,
        lesson_id text NOT NULL,
        project text NOT NULL,
        shown integer NOT NULL,
        helped integer NOT NULL,
        PRIMARY KEY (lesson_project, lesson_id, project)
    );
    CREATE INDEX goldenloop_lesson_counts_by_project ON goldenloop_lesson_counts (project, helped);
    """,
]

VECTOR_MIGRATIONS = [
    """
    CREATE EXTENSION IF NOT EXISTS vector;
    CREATE TABLE goldenloop_lesson_vectors (
        record_seq bigint NOT NULL REFERENCES goldenloop_lessons (record_seq) ON DELETE CASCADE,
        dims integer NOT NULL,
        embedding vector NOT NULL,
        PRIMARY KEY (record_seq, dims)
    );
    """,
]


def vector_index_statements(dims: int) -> list[str]:
    """The indexes that keep ranking by meaning an index scan for embeddings of `dims`
    numbers: HNSW over the vectors of that size (a partial expression index, since one
    column holds every size) and the lessons still without such a vector (an index that
    is empty once every lesson is embedded)."""
    dims = int(dims)  # spliced into DDL: an int, never text
    statements = [
        f"CREATE INDEX IF NOT EXISTS goldenloop_lessons_unembedded_{dims} ON goldenloop_lessons (record_seq)"
        f" WHERE NOT (vector_dims @> ARRAY[{dims}])",
    ]
    if dims <= MAX_INDEXED_DIMS:
        statements.append(
            f"CREATE INDEX IF NOT EXISTS goldenloop_lesson_vectors_hnsw_{dims} ON goldenloop_lesson_vectors"
            f" USING hnsw ((embedding::vector({dims})) vector_cosine_ops) WHERE dims = {dims}"
        )
    return statements


def memory_database(url: str) -> Database:
    """A `Database` whose connections have the memory's tables, checked now: a server that
    cannot be reached or a schema from a newer goldenloop is a PostgresUnavailable here,
    when a run or command opens its memory, not in the middle of a task."""
    try:
        return Database(url, setup=prepare).open_now()
    except psycopg_module().Error as exc:
        raise PostgresUnavailable(f"cannot set up the memory tables at {safe_url(url)}: {first_line(exc)}") from None


def prepare(conn: psycopg.Connection) -> None:
    """What every connection of the memory needs: the tables, and commits that are on disk
    when they return (an append that returned must survive a crash of the server)."""
    apply_schema(conn, COMPONENT, MIGRATIONS)
    # A URL's connections all start with the same setting: a worker asks once.
    if learnt(conn, "synchronous_commit off",
              lambda: conn.execute("SELECT current_setting('synchronous_commit')").fetchone()[0] == "off"):
        conn.execute("SET synchronous_commit TO on")
