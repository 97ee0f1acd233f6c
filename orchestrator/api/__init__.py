"""The REST API of `goldenloop serve`: the Reflect skill over HTTP (docs/API.md).

Nothing here is imported unless `serve` runs, so the command line stays free of
Starlette and uvicorn; `app.create_app` is the entry point.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reflection.exports import lazy_exports

if TYPE_CHECKING:
    from orchestrator.api.app import create_app
    from orchestrator.api.server import server_config
    from orchestrator.api.settings import ApiSettings

_HOMES = {
    "create_app": "orchestrator.api.app",
    "server_config": "orchestrator.api.server",
    "ApiSettings": "orchestrator.api.settings",
}

__getattr__ = lazy_exports(__name__, _HOMES)

__all__ = ["ApiSettings", "create_app", "server_config"]
