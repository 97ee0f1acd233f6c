"""Fixtures of the API tests: a root folder with a project in it, `serve` and `asgi`."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from pathlib import Path

import httpx
import pytest
from apikit import Serve, in_process, serving

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
        return serving(_settings(root, overrides))

    return start


@pytest.fixture
def asgi(root: Path) -> Serve:
    """Like `serve`, but the app is called in-process: for what no socket takes part in."""

    def start(**overrides: object) -> AbstractAsyncContextManager[httpx.AsyncClient]:
        return in_process(_settings(root, overrides))

    return start


def _settings(root: Path, overrides: dict[str, object]) -> ApiSettings:
    return ApiSettings(**{"roots": (root.resolve(),), **overrides})  # type: ignore[arg-type]
