"""`goldenloop serve`: the Reflect skill's REST API (docs/API.md), served by uvicorn.

Everything is checked before the port opens: Starlette and uvicorn installed, the
REFLECT_* variables, the roots, a token when the host is not loopback, the model's API
key, the port free. Any problem is one sentence and exit 2. Ctrl-C (or SIGTERM) lets
requests in flight finish and exits 130, as the other commands do when interrupted.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator.api.settings import (
    ApiConfigError,
    ApiSettings,
    check_exposure,
    reflect_config_from_env,
    resolved_roots,
    token_from_env,
)
from orchestrator.render import library_warnings_to_stderr
from reflection.llm import ChatModel

EXIT_OK, EXIT_USAGE, EXIT_INTERRUPTED = 0, 2, 130


class ServeError(Exception):
    """Why the server cannot start, as one sentence."""


def run_serve(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    try:
        import starlette  # noqa: F401 - only to learn whether the extra is installed
        import uvicorn
    except ImportError:
        return _fail("the API needs Starlette and uvicorn: install goldenloop[api] (pip install 'goldenloop[api]')")
    from orchestrator.api.server import server_config

    try:
        settings = build_settings(args, os.environ if env is None else env)
        listener = _bind(args.host, args.port)
    except ServeError as exc:
        return _fail(str(exc))
    library_warnings_to_stderr()
    server = uvicorn.Server(server_config(settings, log_level="warning"))
    _announce(listener, settings)
    return _serve_until_stopped(server, listener)


def build_settings(args: argparse.Namespace, env: Mapping[str, str]) -> ApiSettings:
    """The app's settings from the switches and the environment; ServeError on a bad one."""
    try:
        token = token_from_env(env)
        check_exposure(args.host, token)
        return ApiSettings(
            roots=resolved_roots(args.root or [Path.cwd()]),
            reflect=reflect_config_from_env(env, with_model=args.model is not None),
            token=token,
            max_body=args.max_body,
            read_timeout=args.read_timeout,
            model=_model(args.model),
        )
    except ApiConfigError as exc:
        raise ServeError(str(exc)) from None


def _model(name: str | None) -> ChatModel | None:
    if name is None:
        return None
    from reflection.llm import LiteLLMModel, missing_api_key, preload_litellm

    problem = missing_api_key(name)
    if problem:
        raise ServeError(problem.rstrip("."))
    preload_litellm()  # the first reflection should not wait for litellm's import
    return LiteLLMModel(name)


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, opened here so a busy port is one sentence, not a log line."""
    try:
        return listen(host, port)
    except OSError as exc:
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def listen(host: str, port: int, backlog: int = 512) -> socket.socket:
    """A TCP listener for uvicorn's `sockets=`. Its protocol is named (IPPROTO_TCP, not 0)
    because asyncio sets TCP_NODELAY only on accepted sockets that say they are TCP;
    without it a response's headers and body, written apart, wait ~40 ms for an ACK."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock


def _announce(listener: socket.socket, settings: ApiSettings) -> None:
    host, port = listener.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(f"goldenloop serve: listening on http://{shown}:{port} (Ctrl-C stops)")
    print(f"goldenloop serve: projects allowed under {', '.join(str(r) for r in settings.roots)}")
    if settings.token:
        print("goldenloop serve: every request but /api/health needs the bearer token")
    sys.stdout.flush()


def _serve_until_stopped(server: Any, listener: socket.socket) -> int:
    """uvicorn handles SIGINT/SIGTERM itself, then re-raises the signal to the handlers it
    found: ours only note it, so the command can end with 130 instead of a traceback."""
    caught: list[int] = []
    previous = {sig: signal.signal(sig, lambda number, _frame: caught.append(number))
                for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run(sockets=[listener])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        listener.close()
    if caught:
        print("goldenloop serve: stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK


def _fail(message: str) -> int:
    print(f"goldenloop serve: {message}", file=sys.stderr)
    return EXIT_USAGE
