"""Shared fixtures: real git repositories in tmp dirs, and the anyio backend."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def git(cwd: Path, *args: str) -> str:
    """Run git in cwd and return its stdout; fail the test on a non-zero exit."""
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """A fresh repository with one commit holding README.md, on branch main."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.invalid")
    git(repo, "config", "user.name", "goldenloop tests")
    git(repo, "config", "commit.gpgsign", "false")
    (repo / "README.md").write_text("# sample\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "initial")
    return repo
