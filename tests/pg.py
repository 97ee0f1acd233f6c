"""A real PostgreSQL server for the tests, started from the pip-installable pgserver package.

One server per test session (it starts in about a second); each test that wants one gets
a database of its own (`new_database`, about 30 ms), so tests never see each other's rows.
The server listens on a Unix socket only. Its data lives in a folder of its own under the
system's temporary folder, not pytest's: as root, pgserver runs the server as the user
`pgserver`, who must reach that folder, and pytest makes its own folders private to root
again whenever another pytest run starts on the machine.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import psycopg

_names = itertools.count(1)


class PgServer:
    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="goldenloop-pg-"))
        # pgserver keeps a lock and, for long paths, its socket in the user's runtime folder.
        os.environ.setdefault("XDG_RUNTIME_DIR", str(self.base))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver

        self.server = pgserver.get_server(self.base / "pgdata", cleanup_mode="delete")

    def url(self, database: str = "postgres") -> str:
        return self.server.get_uri(database)

    def new_database(self, prefix: str = "test") -> str:
        """A fresh, empty database; its URL."""
        name = f"{prefix}_{os.getpid()}_{next(_names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def restart(self, mode: str = "immediate") -> None:
        """Stop the server the way a crash (`immediate`) or an operator (`fast`) would, and start it again."""
        from pgserver import _commands  # the package's own pg_ctl, run as its server user

        _commands.pg_ctl(["-w", "-m", mode, "restart"], pgdata=self.server.pgdata,
                         user=self.server.system_user, timeout=60)

    def stop(self) -> None:
        """Stop without the shutdown checkpoint (the data is thrown away), then delete it."""
        from pgserver import _commands

        try:
            _commands.pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=self.server.pgdata,
                             user=self.server.system_user, timeout=60)
        finally:
            self.server.cleanup()
            shutil.rmtree(self.base, ignore_errors=True)
