"""Fixtures of the API tests: a root folder with a project in it, and `serve`."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path

import httpx
import pytest
from apikit import Serve, serving

from orchestrator.api.settings import ApiSettings


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    (folder / "proj").mkdir(parents=True)
    return folder


@pytest.fixture
def project(root: Path) -> Path:
    return root / "proj"


@pytest.fixture
def serve(root: Path) -> Serve:
    """`async with serve(**settings) as client`; the roots default to the `root` fixture."""

    def start(**overrides: object) -> AbstractAsyncContextManager[httpx.AsyncClient]:
        settings = ApiSettings(**{"roots": (root.resolve(),), **overrides})  # type: ignore[arg-type]
        return serving(settings)

    return start
