"""What an overnight run shows: a live board on a terminal, plain lines elsewhere, and
the summary table at the end."""

from __future__ import annotations

import sys
import time
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from orchestrator.render import HumanLines, JsonLines, attempt_words, verdict_mark
from orchestrator.runlog import Event, Listener
from reflection.meter import Meter

if TYPE_CHECKING:
    from orchestrator.batch.engine import Budget
    from orchestrator.batch.summary import RepoReport


class PlainDisplay(AbstractContextManager):
    """One line per event (or the JSON event stream): for logs, pipes and CI."""

    def __init__(self, listener: Listener) -> None:
        self.listener = listener

    def __call__(self, event: Event) -> None:
        self.listener(event)

    def __exit__(self, *exc: object) -> None:
        return None


class LiveDisplay(AbstractContextManager):
    """A rich Live board: counts, each running task's subtask and attempt, tokens, cost."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console()
        self.started = time.monotonic()
        self.done = self.blocked = self.other = 0
        self.running: dict[str, str] = {}  # taskId -> what it is doing
        self.meter = Meter()  # every model call seen in the events
        self.last = ""
        # Rendered anew at each refresh, so that its clock ticks between events too.
        self.live = Live(console=self.console, refresh_per_second=4, transient=False, get_renderable=self.render)

    def __enter__(self) -> LiveDisplay:
        self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.live.refresh()
        self.live.__exit__(None, None, None)

    def __call__(self, event: Event) -> None:
        kind, task = event.get("event"), event.get("taskId")
        if task and event.get("repo"):  # repositories side by side may share task ids
            task = f"{event['repo']} {task}"
        if kind == "task_started":
            self.running[task] = "planning"
        elif kind == "attempt_started":
            self.running[task] = f"{event['subtaskId']} {attempt_words(event)}"
        elif kind == "verdict":
            self.last = f"{task}: {verdict_mark(event)} {event.get('summary', '')}"
        elif kind == "reflection":
            self.last = f"{task}: reflection [{event.get('category')}] {event.get('analysis', '')}"
        elif kind == "model_call":
            self.meter.add_call(event.get("inputTokens"), event.get("outputTokens"), event.get("costUsd"),
                                agent=bool(event.get("agent")), requests=event.get("requests"),
                                cached=event.get("cachedTokens"))
        elif kind in ("task_closed", "task_blocked", "task_reopened", "task_stopped"):
            self.running.pop(task, None)
            if kind == "task_closed":
                self.done += 1
            elif kind == "task_blocked":
                self.blocked += 1
        elif kind in ("merge_conflict", "combined_checks_failed", "landing_blocked"):  # closed, then not landed
            self.done, self.blocked = self.done - 1, self.blocked + 1
            what = {"merge_conflict": "merge conflict", "landing_blocked": "a file of yours is in the way"}.get(
                kind, "checks fail with the tasks landed since")
            self.last = f"{task}: {what}, kept on branch {event.get('branch')}"
        elif kind in ("notice", "repository_refused"):
            self.last = str(event.get("message") or event.get("reason"))
        self.live.refresh()

    def render(self):  # noqa: ANN201 - a rich renderable
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        waited = int(time.monotonic() - self.started)
        m = self.meter
        status = Text(
            f"goldenloop overnight: done {self.done} · blocked {self.blocked} · running {len(self.running)} · "
            f"{waited // 60}:{waited % 60:02d} · {m.input_tokens + m.output_tokens} tokens{m.cache_note()} · "
            f"{self.meter.cost_text()}",
            style="bold",
        )
        table = Table(show_header=True, header_style="bold", box=None, padding=(0, 2))
        table.add_column("task")
        table.add_column("now")
        for task, doing in sorted(self.running.items()):
            table.add_row(task, doing)
        return Group(status, table, Text(self.last[:200], style="dim"))


class OvernightLines(HumanLines):
    """HumanLines plus the events only a batch run has, so a log read in the morning
    shows recoveries, refusals, stops and merge conflicts."""

    def _notice(self, e: Event) -> str:
        return f"note: {e.get('message')}"

    def _repository_refused(self, e: Event) -> str:
        return f"refused {e.get('projectDir')}: {e.get('reason')}"

    def _repository_started(self, e: Event) -> str:
        return f"Repository {e.get('projectDir')} ({e.get('parallel')} at a time)"

    def _task_stopped(self, e: Event) -> str:
        return f"  stopped {e.get('taskId')}: {e.get('reason')}"

    def _merge_conflict(self, e: Event) -> str:
        return f"  blocked {e.get('taskId')} after all: {e.get('reason')}"  # it starts "merge conflict: "

    def _combined_checks_failed(self, e: Event) -> str:
        return f"  blocked {e.get('taskId')} after all: {e.get('reason')}"


def make_display(json_mode: bool, listener: Listener) -> PlainDisplay | LiveDisplay:
    if not json_mode and sys.stdout.isatty():
        return LiveDisplay()
    if json_mode:
        return PlainDisplay(listener)
    return PlainDisplay(OvernightLines(prefix_task=True))


def print_summary(
    reports: list[RepoReport], budget: Budget, *, json_mode: bool, interrupted: bool
) -> None:
    if json_mode:
        out = JsonLines()
        for report in reports:
            out({"event": "summary", **report.summary()})
        return
    several = sum(bool(r.outcomes) for r in reports) > 1  # then say whose each task is
    rows = [
        ((f"{r.project_dir.name} " if several else "") + o.task_id, o.status, str(o.attempts), str(o.reflections),
         " ".join(c[:8] for c in o.commits) or "-", o.meter.cost_text(), f"{o.duration_s:.1f}s")
        for r in reports for o in r.outcomes
    ]
    header = ("task", "outcome", "attempts", "reflections", "commits", "cost", "time")
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(header)]
    print()
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    for r in reports:
        if not r.started:
            print(f"{r.project_dir}: not started: {r.stop_reason}")
            continue
        why = f"refused: {r.refused}" if r.refused else (r.stop_reason or "interrupted")
        print(f"{r.project_dir}: stopped because {why}")
        if not r.refused:
            print(f"  summary: {r.project_dir / '.openagents' / 'runs' / (r.run_id + '-summary.json')}")
            print(f"  report:  {r.project_dir / '.openagents' / 'runs' / (r.run_id + '.html')}")
    m = budget.meter
    print(f"Model calls: {m.calls_text()}, {m.tokens_text()}, cost {m.cost_text()}"
          + ("; interrupted: the tasks in flight were put back to open" if interrupted else ""))
