"""PostgresTaskReflectionStore: task notes (seed 000) in a team's PostgreSQL database.

With `memory.store: postgresql://...` the notes an accepted task leaves live beside the
team's reflections, so a fresh clone, a CI runner and every fleet worker read the same
ones. One row per (project, identity), the notes as JSONB: `store` is one upsert (last
write wins, as in the file store; a later reflection has seen more runs), `retrieve` one
primary-key read. Its tables are a schema component of their own (`task_notes`), so
they change apart from the memory's.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import orjson
from pydantic import ValidationError

from reflection.postgres.connection import (
    Database,
    PostgresUnavailable,
    apply_schema,
    first_line,
    psycopg_module,
    safe_url,
)
from reflection.task_reflection import TaskReflection

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger("goldenloop.task_store")

COMPONENT = "task_notes"
MIGRATIONS = [
    """
    CREATE TABLE goldenloop_task_reflections (
        project text NOT NULL,
        identity text NOT NULL,
        reflected_at timestamptz,
        run_count integer,
        body jsonb NOT NULL,
        PRIMARY KEY (project, identity)
    );
    """,
]
UPSERT_SQL = (
    "INSERT INTO goldenloop_task_reflections (project, identity, reflected_at, run_count, body)"
    " VALUES (%s, %s, %s, %s, %s::jsonb)"
    " ON CONFLICT (project, identity) DO UPDATE SET reflected_at = excluded.reflected_at,"
    " run_count = excluded.run_count, body = excluded.body"
)
SELECT_SQL = "SELECT body::text FROM goldenloop_task_reflections WHERE project = %s AND identity = %s"


class PostgresTaskReflectionStore:
    """The `TaskReflectionStore` of one project in a shared database; thread-safe (its one
    connection is shared under a lock) and retried across a server restart."""

    def __init__(self, url: str, *, project: str) -> None:
        self.project = project
        self.location = f"{safe_url(url)} (project {project})"
        try:
            self._db = Database(url, setup=_prepare).open_now()
        except psycopg_module().Error as exc:
            raise PostgresUnavailable(f"cannot set up the task notes' table at {safe_url(url)}: "
                                      f"{first_line(exc)}") from None

    def store(self, identity: str, reflection: TaskReflection) -> None:
        body = reflection.to_dict()
        row = (self.project, identity, reflection.reflected_at, reflection.run_count, orjson.dumps(body).decode())
        self._db.run(lambda conn: conn.execute(UPSERT_SQL, row))

    def retrieve(self, identity: str) -> TaskReflection | None:
        row = self._db.run(lambda conn: conn.execute(SELECT_SQL, (self.project, identity)).fetchone())
        if row is None:
            return None
        try:
            return TaskReflection.model_validate(orjson.loads(row[0]))
        except ValidationError as exc:
            log.warning("%s: the task notes %s are not a task reflection (%s); ignored",
                        self.location, identity[:12], exc.error_count())
            return None

    def close(self) -> None:
        self._db.close()


def _prepare(conn: psycopg.Connection) -> None:
    apply_schema(conn, COMPONENT, MIGRATIONS)
