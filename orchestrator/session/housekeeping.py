"""What a run tends under `.openagents/` as it opens: runtime files kept out of git, and the
memory's retention applied at most once a day."""

from __future__ import annotations

import contextlib
import math
import os
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.git.repo import OPENAGENTS
from orchestrator.layout import Layout
from orchestrator.session.errors import UserError
from reflection.fileio import MemoryFileError
from reflection.store import JsonlReflectionStore, ReflectionStore

if TYPE_CHECKING:
    from orchestrator.config import ProjectConfig
    from orchestrator.loop.project_memory import ProjectMemory

RUNTIME_IGNORE = """# Written by goldenloop: runtime files that are not project state.
*.lock
runs/
progress.md
worktrees/
journal/
history/
recovered/
baselines/
"""  # recovered/: copies an older goldenloop kept of files an undo would have lost

# The reflections are a cache of lessons, append-only and unbounded: committing them with
# every task's bookkeeping made git hash the whole file per task (seconds at 1M records)
# and kept a full copy per version in history. They stay on disk, pruned by
# reflexion.retentionDays (docs/ARCHITECTURE.md, "Files").
MEMORY_IGNORE = "memory/reflections.jsonl*\nmemory/.pruned\n"
# Task notes (memory/task-reflections.json) are committed: small (one entry per distinct
# task description), and a fresh clone, a CI runner or a fleet worker must start from
# them. Only a half-written copy a killed run left stays out.
TASK_NOTES_IGNORE = "memory/.task-reflections.json.*.tmp\n"
OLD_TASK_NOTES_IGNORE = "memory/task-reflections.json*\n"  # kept them out of git: taken out again
# What is derived from the reflections (the lesson index, the markdown view), how often
# each lesson helped, and the archive: caches and history. memory/rules.md is versioned.
LESSONS_IGNORE = "memory/lessons.sqlite*\nmemory/lesson-uses.jsonl*\nmemory/reflections/\nmemory/archive/\n"
# What `goldenloop serve` stores for the reflect API: a log of requests, not project state.
REFLECT_API_IGNORE = "memory/reflect-history.jsonl*\n"


def ensure_runtime_ignored(project_dir: Path) -> None:
    """Keep locks, run logs, progress and the reflections out of git; tasks, plans,
    escalations and task notes stay versioned with the code they describe."""
    path = Layout(project_dir).gitignore
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(RUNTIME_IGNORE + MEMORY_IGNORE + TASK_NOTES_IGNORE + LESSONS_IGNORE + REFLECT_API_IGNORE)
        return
    text = path.read_text()
    if OLD_TASK_NOTES_IGNORE in text:  # our own line, from before the notes were committed
        text = text.replace(OLD_TASK_NOTES_IGNORE, "")
        path.write_text(text)
    # Projects from before memory left git, or before the journal (which holds copies of
    # the user's uncommitted files: never to be committed) existed.
    wanted = (("memory/reflections.jsonl", MEMORY_IGNORE), ("journal/", "journal/\n"), ("history/", "history/\n"),
              ("recovered/", "recovered/\n"), ("baselines/", "baselines/\n"),
              ("memory/.task-reflections.json", TASK_NOTES_IGNORE), ("memory/lessons.sqlite", LESSONS_IGNORE),
              ("memory/reflect-history.jsonl", REFLECT_API_IGNORE))
    missing = "".join(entry for key, entry in wanted if key not in text)
    if missing:
        path.write_text(text + ("" if text.endswith("\n") or not text else "\n") + missing)


RETENTION_EVERY_S = 24 * 3600  # a pass rewrites the whole memory: at most once a day


def apply_retention(project_dir: Path, retention_days: int, now: float | None = None,
                    live_per_agent: int = 30, store: ReflectionStore | None = None) -> int | None:
    """Move to the store's archive the attempt reflections older than `retention_days` and
    the outcome reflections beyond each agent's newest `live_per_agent`, at most once a day,
    and bring the markdown view in step with what moved; how many moved, None when nothing
    was due. `store`: the project's JSONL files unless given (a shared database)."""
    now = time.time() if now is None else now
    cutoff = datetime.fromtimestamp(now, UTC) - timedelta(days=retention_days)
    layout = Layout(project_dir)
    if store is not None and not isinstance(store, JsonlReflectionStore):
        return _retention_on(store, layout, cutoff, now, live_per_agent)
    # The JSONL memory: its watermark says whether anything is due without reading it all.
    from reflection.retention_mark import brought_up_to_date, mark_path, read_mark, write_mark

    where = mark_path(layout.reflections)
    old = read_mark(where)
    mark = brought_up_to_date(layout.reflections, old)
    if mark is None:
        return None
    if not mark.due(cutoff, live_per_agent) or now - mark.pruned_at < RETENTION_EVERY_S:
        if mark != old:
            write_mark(where, mark)
        return None
    own = JsonlReflectionStore(layout.reflections) if store is None else store
    try:
        moved = _pass(own, layout, cutoff, live_per_agent)
    finally:
        if store is None:
            own.close()
    write_mark(where, replace(brought_up_to_date(layout.reflections, None) or mark, pruned_at=now))
    return moved


# When this process last looked at each shared store: a fleet worker opens the memory for
# every job in a fresh worktree (no `.pruned` there), and must not ask the database each time.
_LOOKED_AT: dict[str, float] = {}


def _retention_on(store: ReflectionStore, layout: Layout, cutoff: datetime, now: float,
                  live_per_agent: int) -> int | None:
    """A shared database: at most once a day on this machine (the mtime of `memory/.pruned`,
    or this process's last look). An empty memory counts as looked at: what is written
    after it is younger than a day, as after a pass."""
    marker = layout.reflections.with_name(".pruned")
    key = store.location or f"store {id(store)}"
    if now - _LOOKED_AT.get(key, -math.inf) < RETENTION_EVERY_S:
        return None
    with contextlib.suppress(FileNotFoundError):
        if now - marker.stat().st_mtime < RETENTION_EVERY_S:
            return None
    _LOOKED_AT[key] = now
    if store.empty():
        return None
    moved = _pass(store, layout, cutoff, live_per_agent)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    os.utime(marker, (now, now))
    return moved


def _pass(store: ReflectionStore, layout: Layout, cutoff: datetime, live_per_agent: int) -> int:
    """One retention pass; when outcome records moved, their markdown pages move with them."""
    from reflection.retention import archive_outcomes  # once a day: its models only then

    moved = store.prune(cutoff)
    outcomes_moved = archive_outcomes(store, keep_per_agent=live_per_agent)
    if outcomes_moved:
        from reflection.outcome_markdown import write_markdown_view

        write_markdown_view(store.outcomes(), layout.reflections.parent, archived=store.archived_outcomes())
    return moved + outcomes_moved


def prune_memory(project_dir: Path, config: ProjectConfig, memory_url: str | None,
                 memory: ProjectMemory | None, notices: list[str]) -> None:
    """`apply_retention` on the run's memory, said in a notice when it moved anything."""
    if memory_url and memory is None:
        return  # reflexion off: the shared memory is not this run's to tend
    try:
        moved = apply_retention(project_dir, config.reflexion.retention_days,
                                live_per_agent=config.memory.live_per_agent,
                                store=memory.store if memory is not None else None)
    except MemoryFileError as exc:  # before any attempt: one sentence, exit 2
        raise UserError(str(exc)) from None
    if moved:
        notices.append(
            f"moved {moved} reflection(s) to .openagents/memory/archive/: older than "
            f"{config.reflexion.retention_days} days (reflexion.retentionDays), or beyond each agent's newest "
            f"{config.memory.live_per_agent} task reflections (memory.livePerAgent)"
        )


def is_memory(path: str) -> bool:
    """The reflections (a project from before they left git may still track them)."""
    return path.startswith(f"{OPENAGENTS}memory/reflections.jsonl") or path == f"{OPENAGENTS}memory/.pruned"
