"""PostgreSQL for a team: the reflection store, lesson ranking and task notes on a shared database.

Optional: it needs the `postgres` extra (`pip install 'goldenloop[postgres]'`), and nothing
here is imported unless `memory.store` names a `postgresql://` URL. `connection` holds
what the memory and the fleet (orchestrator/fleet) share: URLs that never show a
password, connections that survive a server restart, schemas applied once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reflection.exports import lazy_exports

if TYPE_CHECKING:
    from reflection.postgres.connection import PostgresUnavailable
    from reflection.postgres.store import PostgresReflectionStore
    from reflection.postgres.task_notes import PostgresTaskReflectionStore

_HOMES = {
    "PostgresUnavailable": "reflection.postgres.connection",
    "PostgresReflectionStore": "reflection.postgres.store",
    "PostgresTaskReflectionStore": "reflection.postgres.task_notes",
}

__getattr__ = lazy_exports(__name__, _HOMES)

__all__ = ["PostgresReflectionStore", "PostgresTaskReflectionStore", "PostgresUnavailable"]
