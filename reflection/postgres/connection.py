"""Connections to PostgreSQL that a team can trust overnight.

- `safe_url` is the only way a URL reaches a message or a log: its password is masked.
- `Database` is one connection, opened on first use and opened again when the server
  went away (a restart, a failover, a dropped network): the work is run again until
  `retry_for` seconds have passed, so it must be idempotent (a SELECT, or an INSERT ...
  ON CONFLICT DO NOTHING keyed by the record's id). Work that failed for any other
  reason is not retried.
- `apply_schema` creates a component's tables once per database, under an advisory lock
  so that many workers starting together do it once, and upgrades them step by step.
- `once_per_process()`: a long-lived process (a fleet worker, which opens a project's
  memory for every job) checks each database's schema and settings once, and remembers
  facts that only ever become true (the memory holds a record): per worker, not per job.
  Commands and runs, which live for one task, check on every connection.

psycopg is imported only here and only when a URL is used, so the default install (JSONL
files, one machine) never needs it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger("goldenloop.postgres")

T = TypeVar("T")
SCHEMES = ("postgresql://", "postgres://")
INSTALL_HINT = "pip install 'goldenloop[postgres]'"
CONNECT_TIMEOUT_S = 10
RETRY_FOR_S = 30.0  # how long work waits for a server that went away before it gives up
SCHEMA_LOCK = 0x676C_6F6F  # pg_advisory_xact_lock key of schema changes ("gloo")


# What this process learnt of each database (see `once_per_process`); None: learn it anew.
_LEARNT: dict[tuple[str, str], Any] | None = None


def once_per_process() -> None:
    """From now on, this process checks a database's schema and connection settings once,
    and remembers what `Database.remember` records; see the module docstring."""
    global _LEARNT
    if _LEARNT is None:
        _LEARNT = {}


def learnt(conn: psycopg.Connection, what: str, find: Callable[[], T]) -> T:
    """`find()`, or what it answered before on this database when the process remembers."""
    if _LEARNT is None:
        return find()
    key = (conn.info.dsn, what)
    if key not in _LEARNT:
        _LEARNT[key] = find()
    return _LEARNT[key]  # type: ignore[no-any-return]


class PostgresUnavailable(Exception):
    """PostgreSQL cannot be used (not installed, unreachable, a newer schema); `str()` is one sentence."""


class ServerUnreachable(PostgresUnavailable):
    """No connection could be made: the server may be restarting, so work may try again."""


def is_postgres_url(text: str | None) -> bool:
    return bool(text) and text.startswith(SCHEMES)  # type: ignore[union-attr]


def password_in(url: str) -> bool:
    """Whether the URL itself carries a password (in its user part or as `password=`)."""
    parts = urlsplit(url)
    if parts.password:
        return True
    return any(key == "password" and value for key, value in parse_qsl(parts.query))


def safe_url(url: str) -> str:
    """The URL with any password replaced by `***`: for messages, logs and run summaries."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.split(':', 1)[0]}:***@{host}"
    query = urlencode([(k, "***" if k == "password" else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)],
                      safe="/*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def psycopg_module() -> Any:
    """psycopg, or PostgresUnavailable saying how to install it."""
    try:
        import psycopg
    except ImportError:
        raise PostgresUnavailable(f"PostgreSQL needs the psycopg driver, which is not installed: {INSTALL_HINT}") from None
    return psycopg


def connect(url: str, *, autocommit: bool = True) -> psycopg.Connection:
    """A new connection, or PostgresUnavailable naming the server (never its password)."""
    psycopg = psycopg_module()
    try:
        return psycopg.connect(url, autocommit=autocommit, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error as exc:
        raise ServerUnreachable(f"cannot connect to PostgreSQL at {safe_url(url)}: {first_line(exc)}") from None


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def server_gone(exc: BaseException) -> bool:
    """An error that another connection may not meet: the server restarted, went away or
    is starting up. Errors in the work itself (a constraint, a syntax error) are not."""
    psycopg = psycopg_module()
    return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError | ServerUnreachable)


class Database:
    """One connection to `url`, shared by the threads of a process, reopened after a restart.

    `setup` runs on every new connection (e.g. `apply_schema`, which is cheap once done).
    """

    def __init__(self, url: str, *, retry_for: float = RETRY_FOR_S,
                 setup: Callable[[psycopg.Connection], None] | None = None) -> None:
        self.url = url
        self.retry_for = retry_for
        self._setup = setup
        self._conn: psycopg.Connection | None = None
        self._mutex = threading.RLock()

    @property
    def location(self) -> str:
        return safe_url(self.url)

    def run(self, work: Callable[[psycopg.Connection], T]) -> T:
        """`work(connection)`, run again on a fresh connection while the server is away."""
        deadline, pause = time.monotonic() + self.retry_for, 0.05
        with self._mutex:
            while True:
                try:
                    return work(self._connection())
                except Exception as exc:
                    if not server_gone(exc):
                        raise
                    self._drop()
                    if time.monotonic() >= deadline:
                        raise PostgresUnavailable(
                            f"PostgreSQL at {self.location} did not answer for {self.retry_for:.0f} s: {first_line(exc)}"
                        ) from None
                    log.info("PostgreSQL at %s went away (%s); trying again", self.location, first_line(exc))
                    time.sleep(pause)
                    pause = min(pause * 2, 1.0)

    def transaction(self, work: Callable[[psycopg.Connection], T]) -> T:
        """`work` inside one transaction (committed, or rolled back on error), retried like `run`."""

        def in_transaction(conn: psycopg.Connection) -> T:
            with conn.transaction():
                return work(conn)

        return self.run(in_transaction)

    def knows(self, fact: str) -> bool:
        """Whether this process recorded `fact` of this database (`remember`)."""
        return _LEARNT is not None and _LEARNT.get((self.url, fact)) is True

    def remember(self, fact: str) -> None:
        """Record a fact that stays true (a table holds rows), when the process remembers."""
        if _LEARNT is not None:
            _LEARNT[(self.url, fact)] = True

    def open_now(self) -> Database:
        """Connect and set up at once, keeping the connection for the work to come: a wrong
        URL or schema is said now, and not after the wait `run` gives a restarting server."""
        with self._mutex:
            self._connection()
        return self

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._drop()
            conn = connect(self.url)
            try:
                if self._setup is not None:
                    self._setup(conn)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _drop(self) -> None:
        close_quietly(self._conn)
        self._conn = None

    def close(self) -> None:
        with self._mutex:
            self._drop()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def close_quietly(conn: psycopg.Connection | None) -> None:
    """Close a connection that may already be broken (closing one can fail too)."""
    if conn is not None:
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - nothing left to release
            pass


def apply_schema(conn: psycopg.Connection, component: str, migrations: Sequence[str]) -> int:
    """Bring `component`'s tables to version len(migrations); return the version found.

    migrations[i] takes the schema from version i to i + 1 (migrations[0] creates it).
    Each step runs in the same transaction as its version's record, under an advisory
    lock, so concurrent callers apply each step once and a failed step changes nothing.
    A database that a newer goldenloop set up is refused rather than used half-understood.
    Once per database in a process that remembers (`once_per_process`).
    """
    return learnt(conn, f"schema {component} {len(migrations)}", lambda: _apply_schema(conn, component, migrations))


def _apply_schema(conn: psycopg.Connection, component: str, migrations: Sequence[str]) -> int:
    wanted = len(migrations)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS goldenloop_schema("
            " component text PRIMARY KEY, version integer NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        row = conn.execute("SELECT version FROM goldenloop_schema WHERE component = %s", (component,)).fetchone()
        found = row[0] if row else 0
        if found > wanted:
            raise PostgresUnavailable(
                f"the database's {component} tables are at version {found}, newer than this goldenloop "
                f"knows ({wanted}): upgrade goldenloop on this machine"
            )
        for step in migrations[found:]:
            conn.execute(step)  # type: ignore[arg-type]  # our own DDL, no parameters
        if found < wanted:
            conn.execute(
                "INSERT INTO goldenloop_schema(component, version) VALUES (%s, %s)"
                " ON CONFLICT (component) DO UPDATE SET version = excluded.version, applied_at = now()",
                (component, wanted),
            )
    return found
