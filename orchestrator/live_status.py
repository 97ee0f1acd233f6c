"""`do-one-task` on a terminal: a live line under the run's lines saying what it waits for.

The agent, the model or the checks; how long it has waited; the tokens so far. The lines
the run prints scroll above it (rich's Live takes stdout while it shows), and the line
goes when the run ends. Not on a terminal, or with --json, there is no live line: the
plain lines alone, as a log wants them.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from typing import Any

from orchestrator.runlog import Event, Listener
from reflection.meter import Meter

REFRESH_PER_S = 2


class LiveStatus(AbstractContextManager):
    """A listener that passes every event on and keeps the live line up to date."""

    def __init__(self, listener: Listener) -> None:
        from rich.console import Console
        from rich.live import Live

        self.listener = listener
        self.doing = "opening the repository"
        self.since = time.monotonic()
        self.meter = Meter()  # the model calls seen so far
        self.worker = ""
        self.live = Live(console=Console(), refresh_per_second=REFRESH_PER_S, transient=True,
                         get_renderable=self.render, redirect_stdout=True, redirect_stderr=True)

    def __enter__(self) -> LiveStatus:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.__exit__(None, None, None)

    def __call__(self, event: Event) -> None:
        self.listener(event)
        doing = self._doing(event)
        if doing is not None and doing != self.doing:
            self.doing, self.since = doing, time.monotonic()
            self.live.refresh()  # shown at once, not at the next tick

    def render(self) -> Any:
        from rich.text import Text

        waited = int(time.monotonic() - self.since)
        m = self.meter
        return Text(f"  … {self.doing} · {waited // 60}:{waited % 60:02d} · "
                    f"{m.input_tokens + m.output_tokens} tokens so far{m.cache_note()}", style="dim")

    def _doing(self, e: Event) -> str | None:
        kind = e.get("event")
        if kind == "task_started":
            return "the checks, before any change"
        if kind == "attempt_started":
            self.worker = e.get("executor") or "the model"
            return f"attempt {e.get('number', e.get('attempt'))}: waiting for {self.worker}"
        if kind == "model_call":
            self.meter.add_call(e.get("inputTokens"), e.get("outputTokens"), e.get("costUsd"),
                                agent=bool(e.get("agent")), requests=e.get("requests"), cached=e.get("cachedTokens"))
            if e.get("purpose") == "execute":  # the attempt's edit is made: its checks run next
                return "the checks on the attempt"
            return f"the model ({e.get('purpose')})"
        if kind == "verdict":
            return "reflecting, then the next attempt" if not e.get("passed") else "committing"
        return None
