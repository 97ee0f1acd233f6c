"""The morning report: `.openagents/runs/<runId>.html`, one self-contained page per run.

Written next to the run's summary when a run ends, from what the run already wrote: the
outcomes, and the run log for when each task started and ended and what each attempt
and reflection said. One file with no scripts, fonts or images from elsewhere, so it
opens from disk in any browser, offline, and can be mailed as is. All text is escaped
and redacted once more: a run log is already redacted, a page may travel further.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from orchestrator.batch.report_parts import (
    NOT_PRICED_WHY,
    RunHeader,
    cost_words,
    next_commands,
    task_diff,
    task_links,
)
from orchestrator.layout import Layout
from orchestrator.loop.outcome import TaskOutcome
from orchestrator.render import verdict_mark
from orchestrator.runlog import Event, read_events
from reflection.fileio import atomic_write
from reflection.meter import Meter
from reflection.redact import redact

COLOURS = {"closed": "#2e7d32", "blocked": "#c62828", "budget": "#ef6c00", "interrupted": "#6d4c41",
           "model_unavailable": "#6a1b9a"}
ENDS = ("task_closed", "task_blocked", "task_reopened")
BAR_WIDTH = 760  # px of the timeline's drawing area

STYLE = """body{font:15px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:960px;color:#222;padding:0 1rem}
h1{font-size:1.5rem;margin-bottom:.2rem}.sub{color:#555;margin-top:0}
table{border-collapse:collapse;width:100%;margin:1rem 0}th,td{text-align:left;padding:.35rem .5rem;
border-bottom:1px solid #ddd;vertical-align:top}th{background:#f4f4f4}.tag{color:#fff;border-radius:3px;
padding:0 .4rem;font-size:.85rem}.muted{color:#666;font-size:.9rem}code{font-size:.85rem}
details{margin:.4rem 0}summary{cursor:pointer}svg text{font:12px system-ui,sans-serif}
pre{background:#f7f7f7;padding:.5rem;overflow-x:auto;font-size:.8rem}pre.next{margin:.2rem 0}"""


@dataclass
class TaskStory:
    """What the run log says about one task."""

    task_id: str
    title: str = ""
    start: datetime | None = None
    end: datetime | None = None
    lines: list[str] = field(default_factory=list)  # attempts, verdicts, reflections, reviews


def write_morning_report(project_dir: Path, run_id: str, outcomes: Sequence[TaskOutcome], *,
                         stop_reason: str, meter: Meter, header: RunHeader | None = None) -> Path:
    """Write the run's page and return its path."""
    layout = Layout(project_dir)
    log = layout.run_log(run_id)
    events = read_events(log) if log.is_file() else []
    page = render_page(run_id, outcomes, matched(outcomes, stories_of(events)), stop_reason=stop_reason, meter=meter,
                       header=header, extras=[_actionable(project_dir, o) for o in outcomes])
    path = layout.runs / f"{run_id}.html"
    atomic_write(path, page.encode("utf-8"), durable=False)  # a report, read by people: no recovery needs it
    return path


def stories_of(events: Sequence[Event]) -> dict[str, list[TaskStory]]:
    """Each task's runs in this run log, in order: a task put back may run again."""
    stories: dict[str, list[TaskStory]] = {}
    for e in events:
        task_id = e.get("taskId")
        if not task_id:
            continue
        runs = stories.setdefault(task_id, [])
        if e["event"] == "task_started" or not runs:
            runs.append(TaskStory(task_id))
        story, when = runs[-1], _time(e.get("ts"))
        if e["event"] == "task_started":
            story.title, story.start = str(e.get("title") or ""), when
        elif e["event"] in ENDS:
            story.end = when
        line = _story_line(e)
        if line:
            story.lines.append(line)
    return stories


def matched(outcomes: Sequence[TaskOutcome], stories: dict[str, list[TaskStory]]) -> list[TaskStory | None]:
    """The story of each outcome: a task's n-th outcome is its n-th run in the log."""
    seen: dict[str, int] = {}
    found: list[TaskStory | None] = []
    for o in outcomes:
        n = seen[o.task_id] = seen.get(o.task_id, -1) + 1
        runs = stories.get(o.task_id, [])
        found.append(runs[n] if n < len(runs) else None)
    return found


def _story_line(e: Event) -> str | None:
    kind = e["event"]
    if kind == "verdict":
        return f"attempt {e.get('attempt')}: {verdict_mark(e)} {e.get('summary', '')}"
    if kind == "repeat":  # no checks ran: without this line the attempt would be missing from the story
        return f"attempt {e.get('attempt')}: the same code as attempt {e.get('sameAs')}, {e.get('action')}"
    if kind == "edit_failed":
        return f"attempt {e.get('attempt')}: its reply could not be applied as an edit: {e.get('error')}"
    if kind == "reflection":
        return f"reflection ({e.get('source')}): {e.get('analysis')} Next: {e.get('suggestion')}"
    if kind == "reviewed":
        return f"review {e.get('score', 0):.2f} ({e.get('source')})"
    if kind == "escalated":
        return f"escalated: {e.get('reason')}"
    if kind == "committed":
        return f"committed {str(e.get('sha'))[:10]}"
    return None


def _time(value: object) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


@dataclass
class Section:
    """A table of its own on the page, after the tasks' (a fleet's tasks left open)."""

    heading: str
    columns: Sequence[str]
    rows: Sequence[Sequence[str]]
    empty: str = "None."


def render_page(run_id: str, outcomes: Sequence[TaskOutcome], stories: Sequence[TaskStory | None], *,
                stop_reason: str, meter: Meter, tally: str | None = None, workers: Sequence[str] | None = None,
                rows_heading: str = "Tasks", sections: Sequence[Section] = (), header: RunHeader | None = None,
                extras: Sequence[str] | None = None) -> str:
    """The page. A fleet's report passes its own `tally` (tasks, not its rows, which are job
    runs), each row's worker, and its sections; a local run's page passes who ran on which
    repository (`header`) and, per task, its diff, links and next commands (`extras`)."""
    closed = sum(o.status == "closed" for o in outcomes)
    tally = tally or f"{closed} of {len(outcomes)} task(s) closed"
    who = (f"<p class=sub>{_e(header.repository.name)} (<code>{_e(str(header.repository))}</code>) · agent "
           f"{_e(header.agent)} · model {_e(header.model)} · goldenloop's own model {_e(header.own_model)}</p>"
           if header else "")
    head = (f"<h1>goldenloop run {_e(run_id)}</h1>{who}<p class=sub>{_e(tally)}{_e(_span(stories))}. "
            f"Stopped because: {_e(stop_reason)}. Model calls: {_e(meter.calls_text())}; "
            f"{_e(meter.tokens_text())}; cost {_e(cost_words(meter.cost_text()))}.</p>")
    if any(o.meter.cost_text() == "unknown" for o in outcomes) or meter.cost_text() == "unknown":
        head += f"<p class=muted>{_e(NOT_PRICED_WHY)}</p>"
    extras = extras or [""] * len(outcomes)
    body = [head, f"<h2>{_e(rows_heading)}</h2>", _table(outcomes, stories, workers), *map(_section, sections),
            "<h2>The night</h2>", _timeline(outcomes, stories), "<h2>What each task went through</h2>",
            *(_details(o, s, x) for o, s, x in zip(outcomes, stories, extras, strict=True))]
    return (f"<!doctype html><html lang=en><meta charset=utf-8><title>goldenloop {_e(run_id)}</title>"
            f"<style>{STYLE}</style><body>{''.join(body)}</body></html>\n")


def _table(outcomes: Sequence[TaskOutcome], stories: Sequence[TaskStory | None],
           workers: Sequence[str] | None = None) -> str:
    rows = []
    for n, (o, story) in enumerate(zip(outcomes, stories, strict=True)):
        commits = " ".join(f"<code>{_e(c[:10])}</code>" for c in o.commits) or "—"
        worker = f"<td>{_e(workers[n])}</td>" if workers is not None else ""
        rows.append(f"<tr><td>{_e(o.task_id)}</td><td>{_e(story.title if story else '')}</td>{worker}"
                    f"<td>{_tag(o.status)}</td><td>{_e(verdict_cell(o.verdict))}</td><td>{o.attempts}</td>"
                    f"<td>{o.reflections}</td><td>{commits}</td>"
                    f"<td>{_e(o.meter.tokens_text())}</td>"
                    f"<td>{_e(cost_words(o.meter.cost_text()))}</td><td>{o.duration_s:.1f} s</td></tr>")
    if not rows:
        return "<p class=muted>No task ran.</p>"
    return ("<table><tr><th>task</th><th>title</th>" + ("<th>worker</th>" if workers is not None else "")
            + "<th>outcome</th><th>verdict</th><th>attempts</th><th>reflections</th><th>commits</th><th>tokens</th>"
              "<th>cost</th><th>time</th></tr>"
            + "".join(rows) + "</table>")


def _section(section: Section) -> str:
    if not section.rows:
        return f"<h2>{_e(section.heading)}</h2><p class=muted>{_e(section.empty)}</p>"
    head = "".join(f"<th>{_e(c)}</th>" for c in section.columns)
    rows = "".join("<tr>" + "".join(f"<td>{_e(cell)}</td>" for cell in row) + "</tr>" for row in section.rows)
    return f"<h2>{_e(section.heading)}</h2><table><tr>{head}</tr>{rows}</table>"


def _timeline(outcomes: Sequence[TaskOutcome], stories: Sequence[TaskStory | None]) -> str:
    """An SVG bar per task run from its start to its end, coloured by outcome."""
    spans = [(o, s.start, s.end or s.start) for o, s in zip(outcomes, stories, strict=True)
             if s is not None and s.start is not None]
    if not spans:
        return "<p class=muted>The run log holds no task times.</p>"
    first = min(start for _, start, _ in spans)
    last = max(end for _, _, end in spans if end is not None)
    total = max((last - first).total_seconds(), 1e-3)
    bars = []
    for row, (o, start, end) in enumerate(spans):
        x = 90 + BAR_WIDTH * (start - first).total_seconds() / total
        width = max(2.0, BAR_WIDTH * ((end or start) - start).total_seconds() / total)
        y = 10 + row * 24
        bars.append(f'<text x=0 y={y + 13}>{_e(o.task_id)}</text><rect x={x:.1f} y={y} width={width:.1f} height=16 '
                    f'fill="{COLOURS.get(o.status, "#455a64")}"><title>{_e(o.task_id)}: {_e(o.status)}, '
                    f'{o.duration_s:.1f} s</title></rect>')
    height = 20 + 24 * len(spans)
    scale = f'<text x=90 y={height + 4}>{_clock(first)}</text><text x={90 + BAR_WIDTH - 90} y={height + 4}>' \
            f'{_clock(last)}</text>'
    return f'<svg width="{BAR_WIDTH + 100}" height="{height + 12}" role=img>{"".join(bars)}{scale}</svg>'


def _details(o: TaskOutcome, story: TaskStory | None, extra: str = "") -> str:
    lines = "".join(f"<li>{_e(line)}</li>" for line in (story.lines if story else []))
    reason = f"<p>{_e(o.reason)}</p>" if o.reason else ""  # a closed task's says what still fails
    packet = (f"<p class=muted>escalation packet: <code>{_e(str(o.escalation))}</code></p>"
              if o.escalation and not extra else "")
    opened = "" if o.status == "closed" else " open"  # what needs a human in the morning is shown unfolded
    return (f"<details{opened}><summary>{_e(o.task_id)} {_tag(o.status)}</summary>{reason}<ul>{lines}</ul>"
            f"{packet}{extra}</details>")


def _actionable(project_dir: Path, o: TaskOutcome) -> str:
    """A task's next commands, links and diff (collapsed), for a local run's page."""
    commands = "".join(f"<pre class=next>{_e(c)}</pre>" for c in next_commands(project_dir, o))
    links = " · ".join(f'<a href="{html.escape(href, quote=True)}">{_e(label)}</a>'
                       for label, href in task_links(project_dir, o))
    diff = task_diff(project_dir, o)
    shown = (f"<details class=diff><summary>the diff of {_e(diff[0])}</summary><pre>{_e(diff[1])}</pre></details>"
             if diff and diff[1].strip() else "")
    return ((f"<p>Next:</p>{commands}" if commands else "") + (f"<p class=muted>files: {links}</p>" if links else "")
            + shown)


def _span(stories: Sequence[TaskStory | None]) -> str:
    """When the run's tasks started and ended, with the zone."""
    starts = [s.start for s in stories if s and s.start]
    ends = [s.end or s.start for s in stories if s and s.start]
    return f", from {_clock(min(starts), day=True)} to {_clock(max(ends))}" if starts else ""


def _clock(when: datetime, day: bool = False) -> str:
    """A time of the run in this machine's zone, named."""
    local = when.astimezone()
    return local.strftime(("%Y-%m-%d " if day else "") + "%H:%M:%S %Z").strip()


def verdict_cell(parts: dict | None) -> str:
    """A closing verdict in a table cell: `pass-to-pass 11 · fail-to-pass 2 · 1 still failing, not its own`."""
    if not parts:
        return "—"
    words = [f"pass-to-pass {parts.get('passToPass', 0)}"]
    shown = parts.get("failToPass") or []
    words.append(f"fail-to-pass {len(shown)}" if shown else "no test shows the change"
                 if parts.get("proof") in ("missing", "not reported") else "")
    still = parts.get("stillFailing") or []
    if still:
        words.append(f"{len(still)} still failing, not its own")
    return " · ".join(word for word in words if word)


def _tag(status: str) -> str:
    return f'<span class=tag style="background:{COLOURS.get(status, "#455a64")}">{_e(status)}</span>'


def _e(text: str) -> str:
    return html.escape(redact(text))
