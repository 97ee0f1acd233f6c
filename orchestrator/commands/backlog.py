"""`goldenloop add | list | status | show | reopen | retry | import`: the backlog from the command line.

Every command reads and writes `.openagents/tasks.jsonl` through the locked, atomic
`TaskBoard` the loop itself uses, so a command run beside an `overnight` run is safe.
Exit codes: 0 done, 1 not found or refused, 2 usage, 4 a run holds the repository.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from orchestrator.layout import Layout, find_project, safe_name
from orchestrator.tasks import Task, TaskBoard, TaskFileError, waiting_on
from reflection.meter import cached_words

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_LOCKED = 0, 1, 2, 4
RECENT_CLOSED = 5  # closed tasks `list` shows without --all


class BacklogError(Exception):
    def __init__(self, message: str, code: int = EXIT_REFUSED) -> None:
        super().__init__(message)
        self.code = code


def run_backlog(command: str, args: argparse.Namespace) -> int:
    try:
        project = _project(args.dir)
        return COMMANDS[command](args, project)
    except BacklogError as exc:
        return _fail(command, str(exc), exc.code)
    except (TaskFileError, ValueError) as exc:  # ValueError: a task the board would not write
        return _fail(command, str(exc), EXIT_REFUSED)
    except TimeoutError:
        return _fail(command, "another process holds .openagents/tasks.jsonl.lock; try again", EXIT_LOCKED)
    except BrokenPipeError:  # `... | head`: the reader had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


def _fail(command: str, message: str, code: int) -> int:
    print(f"goldenloop {command}: {message}", file=sys.stderr)
    return code


def _project(start: Path) -> Path:
    """The project, its project.json read: a broken one is said now, not at the next run."""
    from orchestrator.config import ConfigError, load_config

    try:
        project = find_project(start)
    except ValueError as exc:
        raise BacklogError(f"{exc} (or create one with goldenloop init)", EXIT_USAGE) from None
    try:
        load_config(project)
    except ConfigError as exc:
        raise BacklogError(str(exc), EXIT_USAGE) from None
    return project


def _board(project: Path) -> TaskBoard:
    """The project's backlog. A project.json written by hand comes without tasks.jsonl: its
    backlog is empty until `add` or `import` starts the file, as `init` would have."""
    return TaskBoard.for_project(project, missing_ok=Layout(project).config.is_file())


def _out(args: argparse.Namespace, data: Any, text: Callable[[], str]) -> int:
    if getattr(args, "json", False):
        sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(text())
    return EXIT_OK


def _row(task: Task, note: str = "") -> str:
    return f"  {task.id:<8} P{task.priority}  {task.type:<8} {task.title}" + (f"  ({_short(note)})" if note else "")


def _blocked_row(task: Task, reason: str, width: int = 600) -> str:
    """A blocked task and, on its own line, why: a reason often ends in the command that helps."""
    if len(reason) <= 60:
        return _row(task, reason)
    reason = _one_line(reason)
    reason = reason if len(reason) <= width else reason[: width - 2] + " …"
    return f"{_row(task)}\n      {reason}"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _short(text: str, width: int = 110) -> str:
    """One line for a table row; the middle goes, as a reason ends with where to read more."""
    text = _one_line(text)
    return text if len(text) <= width else f"{text[: width - 50]} … {text[-47:]}"


def _brief(task: Task) -> dict[str, Any]:
    return task.model_dump(mode="json", by_alias=True, exclude_none=True)


# -- add ----------------------------------------------------------------------------------


def _add(args: argparse.Namespace, project: Path) -> int:
    if not args.title.strip():
        raise BacklogError("a task needs a title", EXIT_USAGE)
    board = _board(project)
    deps = [d.strip() for d in (args.deps or "").split(",") if d.strip()]
    _check_deps(board, deps)
    draft = {"title": args.title.strip(), "description": args.description or "", "priority": args.priority,
             "type": args.type, "labels": list(dict.fromkeys(args.label or [])), "deps": deps}
    task = board.add([draft])[0]
    return _out(args, _brief(task), lambda: task.id)


def _check_deps(board: TaskBoard, deps: list[str]) -> None:
    known = set(board.statuses()) | board.archive.ids()
    unknown = [d for d in deps if d not in known]
    if unknown:
        raise BacklogError(f"no task with id {', '.join(unknown)} to depend on")


# -- list / status ------------------------------------------------------------------------


def _list(args: argparse.Namespace, project: Path) -> int:
    board = _board(project)
    tasks = board.tasks()
    ready = [t for t in board.ready() if t.status == "open"]
    ready_ids = {t.id for t in ready}
    closed_ids = {t.id for t in tasks if t.status == "closed"} | board.archive.ids()
    statuses = board.statuses()
    blocked = [(t, _why_blocked(t, closed_ids, statuses)) for t in tasks
               if t.status == "blocked" or (t.status == "open" and t.id not in ready_ids)]
    working = [t for t in tasks if t.status == "in_progress"]
    closed = sorted((t for t in tasks if t.status == "closed"), key=lambda t: str(t.closed_at or ""), reverse=True)
    shown = closed if args.all else closed[:RECENT_CLOSED]
    archived = len(board.archive.ids())
    data = {"ready": [_brief(t) for t in ready], "blocked": [{**_brief(t), "reason": r} for t, r in blocked],
            "inProgress": [_brief(t) for t in working],
            "closed": {"count": len(closed), "archived": archived, "shown": [_brief(t) for t in shown]},
            "warnings": board.warnings}

    def text() -> str:
        lines = [f"ready ({len(ready)}):", *([_row(t) for t in ready] or ["  (none)"])]
        if blocked:
            lines += [f"blocked ({len(blocked)}):", *[_blocked_row(t, r) for t, r in blocked]]
        if working:
            lines += [f"in progress ({len(working)}):", *[_row(t) for t in working]]
        more = f", {archived} more archived" if archived else ""
        lines.append(f"closed ({len(closed)}{more})" + (":" if shown else ""))
        lines += [_row(t, t.close_reason or "") for t in shown]
        return "\n".join([*lines, *[f"warning: {w}" for w in board.warnings]])

    return _out(args, data, text)


def _why_blocked(task: Task, closed: set[str], statuses: dict[str, str]) -> str:
    if task.status == "blocked":
        return task.close_reason or "blocked (no reason recorded)"
    return "waits on " + ", ".join(waiting_on(task, closed, statuses))


# -- show ---------------------------------------------------------------------------------


def _show(args: argparse.Namespace, project: Path) -> int:
    task = _board(project).get(args.id)
    layout = Layout(project)
    subtasks = _subtasks(project, task.id)
    reflections = _reflections(layout, task.id)
    packet = layout.escalations / f"{safe_name(task.id)}.md"
    escalation = ({"path": str(packet), "summary": _packet_summary(packet), "resolved": task.status == "closed"}
                  if packet.is_file() else None)
    data = {"task": _brief(task), "subtasks": subtasks, "reflections": reflections, "escalation": escalation}
    return _out(args, data, lambda: _show_text(task, subtasks, reflections, escalation))


def _subtasks(project: Path, task_id: str) -> list[dict[str, Any]]:
    """The plan's subtasks, each attempt with its score and cost from the attempt history."""
    from orchestrator.loop.attempt_history import read_attempts
    from orchestrator.loop.plan import SubtaskPlan

    plan = SubtaskPlan.load(SubtaskPlan.path_for(project, task_id))
    stored = {(a.subtask_id, a.number): a for a in read_attempts(project, task_id)}
    found = []
    for subtask in plan.subtasks if plan else []:
        attempts = []
        for record in subtask.attempts:
            attempt = record.to_dict()
            kept = stored.get((subtask.id, record.number))
            if kept is not None:
                used = kept.version.token_usage
                attempt["score"] = round(kept.version.evaluation.overall_score, 4)
                attempt["costUsd"] = used.cost_usd
                attempt["inputTokens"], attempt["outputTokens"] = used.input_tokens, used.output_tokens
                if "cachedTokens" in kept.extra:
                    attempt["cachedTokens"] = kept.extra["cachedTokens"]
            attempts.append(attempt)
        found.append({**subtask.to_dict(), "attempts": attempts})
    return found


def _reflections(layout: Layout, task_id: str) -> list[dict[str, Any]]:
    """The task's attempt reflections, from the store project.json names."""
    from orchestrator.config import ConfigError, load_config
    from orchestrator.loop.project_memory import configured_store
    from reflection.postgres.connection import PostgresUnavailable

    try:
        store = configured_store(load_config(layout.project_dir).config, layout.project_dir)
    except ConfigError:
        return []  # the backlog is shown all the same; a run names what is wrong with the config
    except PostgresUnavailable as exc:
        print(f"goldenloop show: reflections not shown: {exc}", file=sys.stderr)
        return []
    try:
        if store.empty():
            return []
        return [r.to_dict() for r in store.iterate() if r.task_id == task_id]
    finally:
        store.close()


def _packet_summary(packet: Path) -> str:
    """The packet's own one-line account of why the loop gave up."""
    lines = packet.read_text(errors="replace").splitlines()
    return next((line for line in lines if line.startswith(("The loop gave up", "The loop stopped"))),
                lines[0] if lines else "")


def _show_text(task: Task, subtasks: list[dict[str, Any]], reflections: list[dict[str, Any]],
               escalation: dict[str, Any] | None) -> str:
    lines = [f"{task.id}  {task.title}", f"  status {task.status}, priority {task.priority}, type {task.type}"]
    if task.labels:
        lines.append("  labels: " + ", ".join(task.labels))
    if task.deps:
        lines.append("  deps: " + ", ".join(f"{d.id} ({d.type})" for d in task.deps))
    if task.close_reason:
        lines.append(f"  reason: {_one_line(task.close_reason)}")
    if task.commits:
        lines.append("  commits: " + ", ".join(c[:10] for c in task.commits))
    if spent := _spent(subtasks):
        lines.append(spent)
    if task.description:
        lines += ["", *[f"  {line}" for line in task.description.splitlines()]]
    lines += ["", "subtasks:" if subtasks else "subtasks: (not run yet)"]
    for sub in subtasks:
        lines.append(f"  {sub['id']}  {sub.get('status')}  {sub.get('title')}")
        lines += [_attempt_line(a) for a in sub["attempts"]]
    if reflections:
        lines += ["", "reflections:"]
        lines += [f"  {r.get('subtaskId')} attempt {r.get('attemptNumber')}: {r.get('analysis')}\n"
                  f"    suggested: {r.get('suggestion')}" for r in reflections]
    if escalation and escalation["resolved"]:  # the packet of a stop the task has since come through
        lines += ["", f"an earlier escalation, before the task closed: {escalation['path']}"]
    elif escalation:
        lines += ["", f"escalation: {escalation['path']}", f"  {escalation['summary']}"]
    return "\n".join(lines)


def _attempt_line(attempt: dict[str, Any]) -> str:
    from orchestrator.batch.morning_report import verdict_cell

    score = f"  score {attempt['score']:.2f}" if "score" in attempt else ""
    summary = _short(str(attempt.get("summary", "")), 160)
    line = f"    attempt {attempt.get('number')}: {attempt.get('outcome')}{score}  {summary}".rstrip()
    if "inputTokens" in attempt:
        line += f"\n      tokens {_count(attempt['inputTokens'])} in{_cached(attempt)}, " \
                f"{_count(attempt['outputTokens'])} out, cost {_cost(attempt.get('costUsd'))}"
    parts = attempt.get("verdict")
    return f"{line}\n      verdict: {verdict_cell(parts)}" if parts else line


def _count(tokens: int | None) -> str:
    return "unknown" if tokens is None else str(tokens)


def _cached(*attempts: dict[str, Any]) -> str:
    """" (900 cached)" over the attempts whose providers said, " (cache not reported)" where
    none did; nothing for histories kept before cached tokens were."""
    said = [a["cachedTokens"] for a in attempts if "cachedTokens" in a]
    if not said:
        return ""
    reported = [n for n in said if n is not None]
    return f" ({cached_words(sum(reported) if reported else None)})"


def _cost(cost: float | None) -> str:
    return "not priced" if cost is None else f"${cost:.4f}"


def _spent(subtasks: list[dict[str, Any]]) -> str | None:
    """The task's tokens and cost over every attempt kept in its history."""
    kept = [a for sub in subtasks for a in sub["attempts"] if "inputTokens" in a]
    if not kept:
        return None
    total_in = sum(a["inputTokens"] or 0 for a in kept)
    total_out = sum(a["outputTokens"] or 0 for a in kept)
    costs = [a.get("costUsd") for a in kept]
    cost = None if any(c is None for c in costs) else sum(costs)
    return (f"  spent: {total_in} tokens in{_cached(*kept)}, {total_out} out, cost {_cost(cost)} "
            f"over {len(kept)} attempt(s)")


# -- reopen / retry -----------------------------------------------------------------------


def _reopen(args: argparse.Namespace, project: Path) -> int:
    from orchestrator.lock import AgentLock, LockHeld

    try:
        lock = AgentLock(project).acquire()  # held while we change the task: no run starts meanwhile
    except LockHeld as exc:
        raise BacklogError(f"{exc}; wait for it to end", EXIT_LOCKED) from None
    try:
        return _reopen_locked(args, project)
    finally:
        lock.release()


def _reopen_locked(args: argparse.Namespace, project: Path) -> int:
    board = _board(project)
    if args.id not in board.statuses():
        if board.archive.get(args.id) is not None:  # the board would say "no task": say where it went
            raise BacklogError(f"task {args.id} is archived (closed long ago); add it anew with goldenloop add")
        board.get(args.id)  # raises the board's own sentence: no such id, or why its line is invalid
    before = board.get(args.id).status
    task = board.reopen(args.id) if before != "open" else board.get(args.id)
    plan = Layout(project).plan(args.id)
    forgot = bool(args.forget) and plan.exists()
    if forgot:
        plan.unlink()  # its subtasks start fresh; the attempt history and reflections stay
    again = before == "closed" and not forgot and _do_again(plan)
    words = f"{task.id} was {before}, now open" if before != "open" else f"{task.id} is already open"
    if args.forget:
        words += "; its subtask state is deleted" if forgot else "; it had no subtask state"
    elif again:
        words += "; its subtasks will run again against the checks"
    return _out(args, {**_brief(task), "was": before, "forgot": forgot, "again": again}, lambda: words)


def _do_again(path: Path) -> bool:
    """A closed task reopened does its work again: its done subtasks go back to pending
    (their attempts kept, so numbering goes on), so the next run never closes it unjudged."""
    from orchestrator.loop.plan import SubtaskPlan

    plan = SubtaskPlan.load(path)
    if plan is None or not plan.subtasks:
        return False
    for subtask in plan.subtasks:
        subtask.status, subtask.commit = "pending", None
    plan.save(path)
    return True


# -- import -------------------------------------------------------------------------------


def _import(args: argparse.Namespace, project: Path) -> int:
    from orchestrator.commands.import_tasks import ImportFileError, read_drafts
    from orchestrator.tasks import next_free_id

    try:
        drafts = read_drafts(args.file)
    except ImportFileError as exc:
        raise BacklogError(str(exc)) from None
    board = _board(project)
    for draft in drafts.tasks:
        _check_deps(board, list(draft.get("deps", [])))
    fresh, notes = _without_duplicates(board, drafts.tasks)
    if drafts.done:
        notes.append(f"skipped {drafts.done} checked item(s): they are done already")
    if args.dry_run:
        taken = set(board.statuses()) | board.archive.ids()
        ids = []
        for _ in fresh:
            ids.append(next_free_id(taken))
            taken.add(ids[-1])
        added = [{**d, "id": i} for d, i in zip(fresh, ids, strict=True)]
    else:
        added = [_brief(t) for t in board.add(fresh)] if fresh else []
    verb = "would add" if args.dry_run else "added"
    data = {"dryRun": args.dry_run, "added": added, "notes": notes}
    return _out(args, data, lambda: "\n".join([f"{verb} {len(added)} task(s)",
                                               *[f"  {t['id']:<8} {t['title']}" for t in added], *notes]))


def _without_duplicates(board: TaskBoard, drafts: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Drafts whose title no task still to do (open, in progress or blocked) has, nor an earlier draft."""
    titles = {t.title.strip(): f"task {t.id}" for t in board.with_status("open", "in_progress", "blocked")}
    fresh, notes = [], []
    for draft in drafts:
        title = draft["title"]
        if title in titles:
            notes.append(f"skipped {title!r}: {titles[title]} already has this title")
            continue
        titles[title] = "an item earlier in the file"
        fresh.append(draft)
    return fresh, notes


COMMANDS: dict[str, Callable[[argparse.Namespace, Path], int]] = {
    "add": _add, "list": _list, "status": _list, "show": _show, "reopen": _reopen, "retry": _reopen,
    "import": _import,
}
