"""How a command meets the terminal: its switches, its output, and the signals that stop it."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

from orchestrator.render import HumanLines, JsonLines, library_warnings_to_stderr
from orchestrator.session import Overrides

T = TypeVar("T")


def setup_output(json_mode: bool) -> Callable[[dict], None]:
    """Warnings from the library go to stderr as one line each; events to stdout."""
    library_warnings_to_stderr()
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(errors="replace")  # type: ignore[union-attr]
    return JsonLines() if json_mode else HumanLines()


def say(message: str, json_mode: bool, **fields: object) -> None:
    """A message outside the run log: to stderr, or as a JSON line in --json mode."""
    if json_mode:
        JsonLines()({"event": "message", "message": message, **fields})
    else:
        print(message, file=sys.stderr if fields.get("level") == "error" else sys.stdout)


def overrides_from(args: argparse.Namespace) -> Overrides:
    return Overrides(
        model=args.model,
        reflexion=False if args.no_reflexion else None,
        max_retries=args.max_retries,
        allow_dirty=getattr(args, "allow_dirty", False),
        api_base=getattr(args, "api_base", None),
    )


async def interruptible(work: Callable[[], Awaitable[T]]) -> tuple[T | None, bool]:
    """Run `work`; SIGINT or SIGTERM cancels it cleanly. Returns (result, interrupted)."""
    result: list[T] = []
    interrupted = False

    async def watch_signals(scope: anyio.CancelScope) -> None:
        nonlocal interrupted
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                interrupted = True
                scope.cancel()
                return

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(watch_signals, group.cancel_scope)
            result.append(await work())
            group.cancel_scope.cancel()
    except BaseExceptionGroup as errors:  # one worker failed: surface its own exception
        if len(errors.exceptions) == 1:
            raise errors.exceptions[0] from None
        raise
    return (result[0] if result else None), interrupted
