"""Shared fixtures: real git repositories in tmp dirs, the anyio backend, and a scripted
model that starts every test with its script unused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from projects import init_repo

from reflection.scripted import reset_scripted_state


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """A fresh repository with one commit holding README.md, on branch main."""
    return init_repo(tmp_path / "repo")


@pytest.fixture(autouse=True)
def fresh_script_state() -> None:
    """Scripted replies are counted per process: each test reads its script from the top."""
    reset_scripted_state()


@pytest.fixture(scope="session")
def pg_server() -> Iterator:
    """The session's PostgreSQL server (pgserver), started on first use."""
    from pg import PgServer

    server = PgServer()
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server) -> str:
    """The URL of a fresh, empty database of its own on the session's server."""
    return pg_server.new_database()
