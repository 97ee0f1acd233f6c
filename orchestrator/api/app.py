"""The API's Starlette application: `create_app(settings)`.

Why Starlette (served by uvicorn) and not FastAPI: goldenloop is built on anyio, and
Starlette is anyio-native, so the handlers await the same `reflect_on_conversation` and
`anyio.to_thread` the rest of the code uses. FastAPI would only add a layer over the
same Starlette (dependency injection, its own validation and OpenAPI generation) for
five routes whose bodies pydantic already validates and whose OpenAPI document
`orchestrator.api.openapi` builds from the same models; it would also be one more
dependency for the `api` extra to pin.

The stack, outside in: Starlette's error middleware (a 500 without a traceback), the
lingering close (an early answer reaches the client), the gate for web pages (Origin,
Host), the bearer-token gate, the router (404 and 405 as JSON), then the handlers.
"""

from __future__ import annotations

from importlib import metadata

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route

from orchestrator.api import routes
from orchestrator.api.errors import HANDLERS
from orchestrator.api.guard import BrowserGate, LingeringClose, TokenGate
from orchestrator.api.settings import ApiSettings


def create_app(settings: ApiSettings) -> Starlette:
    app = Starlette(
        routes=[
            Route("/api/skills/reflect", routes.reflect, methods=["POST"]),
            Route("/api/skills/reflect/history", routes.history_endpoint, methods=["GET", "DELETE"]),
            Route("/api/health", routes.health, methods=["GET"]),
            Route("/openapi.json", routes.openapi, methods=["GET"]),
        ],
        middleware=[Middleware(LingeringClose), Middleware(BrowserGate, loopback_host=settings.token is None),
                    Middleware(TokenGate, token=settings.token)],
        exception_handlers=HANDLERS,
    )
    app.state.api = routes.ApiState(settings, _version())
    return app


def _version() -> str:
    try:
        return metadata.version("goldenloop")
    except metadata.PackageNotFoundError:  # a plain checkout
        return "0.0.0"
