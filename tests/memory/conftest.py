"""The store backends every conformance test runs on: in memory, JSONL files, PostgreSQL.

A new backend joins by adding a parameter to `backend`: it then has to pass the whole
conformance suite (test_store_conformance.py) to be a `ReflectionStore`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from reflection.backends import open_store
from reflection.store import InMemoryReflectionStore, ReflectionStore

PROJECT = "team/app"


@dataclass
class Backend:
    """One kind of store, and a way to open more handles on the same memory (as another
    process or another machine would)."""

    name: str
    memory_dir: Path
    url: str | None = None  # the database of the PostgreSQL backend
    _shared: InMemoryReflectionStore = field(default_factory=InMemoryReflectionStore)
    _opened: list[ReflectionStore] = field(default_factory=list)

    @property
    def across_processes(self) -> bool:
        """Whether another process can open this memory (not the in-memory store)."""
        return self.name != "memory"

    def open(self, project: str = PROJECT) -> ReflectionStore:
        if self.name == "memory":
            return self._shared
        store = open_store(self.url, self.memory_dir, project=project)
        self._opened.append(store)
        return store

    def close_all(self) -> None:
        for store in self._opened:
            store.close()


WRITTEN = ["jsonl", pytest.param("postgresql", marks=pytest.mark.postgres)]  # they keep records as written


@pytest.fixture(params=["memory", *WRITTEN])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from _opened(request, tmp_path)


@pytest.fixture(params=WRITTEN)
def written_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """The backends that keep a record as it was written, so another tool (or an older
    goldenloop) may have left one that no longer validates: not the in-memory store,
    which holds validated objects only."""
    yield from _opened(request, tmp_path)


def _opened(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    chosen = Backend(request.param, tmp_path / "memory", url)
    yield chosen
    chosen.close_all()


@pytest.fixture
def store(backend: Backend) -> ReflectionStore:
    return backend.open()
