"""`.openagents/progress.md`: the last run, summarised for a human in the morning."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from orchestrator.layout import Layout
from orchestrator.loop.outcome import TaskOutcome
from reflection.fileio import atomic_write
from reflection.meter import Meter
from reflection.redact import redact


def write_progress(
    project_dir: Path,
    run_id: str,
    outcomes: Sequence[TaskOutcome],
    *,
    stop_reason: str,
    meter: Meter,
) -> Path:
    path = Layout(project_dir).progress
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# goldenloop run {run_id}",
        "",
        f"Finished {when}. Stopped because: {stop_reason}.",
        f"Model calls: {meter.calls_text()}; {meter.tokens_text()}; "
        f"cost {meter.cost_text()}.",
        f"Events: `.openagents/runs/{run_id}.jsonl`",
        "",
        "| task | outcome | attempts | reflections | commits | cost | time |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for o in outcomes:
        commits = " ".join(c[:8] for c in o.commits) or "-"
        lines.append(
            f"| {o.task_id} | {o.status} | {o.attempts} | {o.reflections} | {commits} | "
            f"{o.meter.cost_text()} | {o.duration_s:.1f} s |"
        )
    blocked = [o for o in outcomes if o.status != "closed"]
    if blocked:
        lines += ["", "## Needs a human", ""]
        lines += [f"- {o.task_id}: {o.reason}" for o in blocked]
    # A report for people, written again by the next run: no recovery needs it after a power loss.
    atomic_write(path, redact("\n".join(lines) + "\n").encode(), durable=False)
    return path
