"""Shared fixtures: real git repositories in tmp dirs, the anyio backend, and a scripted
model that starts every test with its script unused."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from projects import init_repo

from reflection.scripted import reset_scripted_state

# goldenloop's private folder outside repositories (orchestrator.private_home): the tests',
# never the user's home; commands the tests start inherit it.
os.environ["XDG_STATE_HOME"] = _STATE = tempfile.mkdtemp(prefix="goldenloop-tests-state-")


def pytest_sessionfinish() -> None:
    shutil.rmtree(_STATE, ignore_errors=True)


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
