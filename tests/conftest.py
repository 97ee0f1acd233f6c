"""Shared fixtures: real git repositories in tmp dirs, and the anyio backend."""

from __future__ import annotations

from pathlib import Path

import pytest
from projects import init_repo


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """A fresh repository with one commit holding README.md, on branch main."""
    return init_repo(tmp_path / "repo")
