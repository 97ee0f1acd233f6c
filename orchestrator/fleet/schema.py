"""The fleet's tables, and the job queue's, created once per database.

Ours (`goldenloop_*`, versioned by `reflection.postgres.connection.apply_schema`):
- `goldenloop_runs`: one night's limits (tasks, deadline, cost) and what it used so far;
- `goldenloop_holds`: the worst case of one model call in flight, reserved from a run's
  budget before the call is made (`orchestrator.fleet.ledger`);
- `goldenloop_outcomes`: one row per job run: who ran which task, how it ended, what it
  cost and what it went through; the morning report is written from them;
- `goldenloop_run_repositories` (version 2): the repositories a run was given, so that
  its report covers each one's backlog, even a repository none of whose tasks ran;
  `goldenloop_runs.cancelled_at` (version 2): set by `goldenloop fleet cancel`;
- `goldenloop_outcomes.cached_tokens` and `cache_reported` (version 3): the input tokens a
  prompt cache served, over the calls whose provider said (0 calls: not reported).

Procrastinate's own schema is applied as its package ships it when `procrastinate_jobs`
does not exist yet, under an advisory lock, so that workers starting together apply it
once. Upgrading it across Procrastinate versions is Procrastinate's migrations' business
(docs/FLEET.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reflection.postgres.connection import Database, apply_schema

if TYPE_CHECKING:
    import psycopg

COMPONENT = "fleet"
QUEUE_SCHEMA_LOCK = 0x676C_7175  # pg_advisory_xact_lock key of the queue's schema ("glqu")

MIGRATIONS = [
    """
    CREATE TABLE goldenloop_runs (
        id text PRIMARY KEY,
        created_at timestamptz NOT NULL DEFAULT now(),
        max_tasks integer,
        max_cost double precision,
        deadline timestamptz,
        started_tasks integer NOT NULL DEFAULT 0,
        spent_cost double precision NOT NULL DEFAULT 0,
        lost_cost double precision NOT NULL DEFAULT 0
    );
    CREATE TABLE goldenloop_holds (
        id bigserial PRIMARY KEY,
        run_id text NOT NULL REFERENCES goldenloop_runs(id) ON DELETE CASCADE,
        cost double precision NOT NULL,
        worker text NOT NULL DEFAULT '',
        expires_at timestamptz NOT NULL
    );
    CREATE INDEX goldenloop_holds_run ON goldenloop_holds(run_id);
    CREATE TABLE goldenloop_outcomes (
        id bigserial PRIMARY KEY,
        run_id text NOT NULL REFERENCES goldenloop_runs(id) ON DELETE CASCADE,
        repo text NOT NULL,
        repo_key text NOT NULL,
        task_id text NOT NULL,
        job_id bigint,
        worker text NOT NULL,
        status text NOT NULL,
        reason text NOT NULL DEFAULT '',
        attempts integer NOT NULL DEFAULT 0,
        reflections integer NOT NULL DEFAULT 0,
        commits jsonb NOT NULL DEFAULT '[]',
        calls integer NOT NULL DEFAULT 0,
        input_tokens integer NOT NULL DEFAULT 0,
        output_tokens integer NOT NULL DEFAULT 0,
        cost double precision DEFAULT 0,  -- NULL: the price is unknown
        duration_s double precision NOT NULL DEFAULT 0,
        started_at timestamptz NOT NULL DEFAULT now(),
        finished_at timestamptz,
        title text NOT NULL DEFAULT '',
        story jsonb NOT NULL DEFAULT '[]',
        escalation text
    );
    CREATE INDEX goldenloop_outcomes_run ON goldenloop_outcomes(run_id, repo_key, task_id);
    CREATE INDEX goldenloop_outcomes_job ON goldenloop_outcomes(job_id);
    """,
    """
    ALTER TABLE goldenloop_runs ADD COLUMN cancelled_at timestamptz;
    CREATE TABLE goldenloop_run_repositories (
        run_id text NOT NULL REFERENCES goldenloop_runs(id) ON DELETE CASCADE,
        repo_key text NOT NULL,
        repo text NOT NULL,
        branch text NOT NULL,
        added bigserial,  -- the order they were given in
        PRIMARY KEY (run_id, repo_key)
    );
    """,
    """
    ALTER TABLE goldenloop_outcomes ADD COLUMN cached_tokens integer NOT NULL DEFAULT 0;
    ALTER TABLE goldenloop_outcomes ADD COLUMN cache_reported integer NOT NULL DEFAULT 0;
    """,
]


def prepare(conn: psycopg.Connection) -> None:
    """Bring a new connection's database to the tables this version uses (cheap once done)."""
    apply_schema(conn, COMPONENT, MIGRATIONS)
    apply_queue_schema(conn)


def apply_queue_schema(conn: psycopg.Connection) -> bool:
    """Procrastinate's tables and functions, when the database has none yet; whether applied."""
    from procrastinate.schema import SchemaManager

    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (QUEUE_SCHEMA_LOCK,))
        row = conn.execute("SELECT to_regclass('procrastinate_jobs') IS NOT NULL").fetchone()
        if row and row[0]:
            return False
        conn.execute(SchemaManager.get_schema())  # type: ignore[arg-type]  # the package's own DDL
    return True


def open_database(url: str) -> Database:
    """The fleet's connection to `url`, its tables made on first use."""
    return Database(url, setup=prepare)
