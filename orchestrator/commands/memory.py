"""`goldenloop memory ...`: the project's memory, seen and managed from the command line.

The store project.json names is the memory (reflections.jsonl and its archive, or a
team's PostgreSQL), with the local markdown view and rules.md beside it; these commands
read and move them with the same code the loop uses, so `memory search` answers with the
loop's own ranking. `migrate` copies the memory between the JSONL files and a team's
PostgreSQL (reflection/migrate.py). Exit codes: 0 done, 1 no such record, 2 usage or
config error (including a database that cannot be reached or used).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from orchestrator.config import ConfigError, ProjectConfig, load_config, memory_store_url, store_problem
from orchestrator.layout import Layout, find_project
from orchestrator.loop.project_memory import configured_store, project_key
from orchestrator.render import library_warnings_to_stderr
from reflection.backends import describe, open_lesson_index
from reflection.fileio import MemoryFileError
from reflection.lessons import LessonRanker, RankedLesson
from reflection.outcome import OutcomeReflection
from reflection.outcome_markdown import MARKER, to_markdown, write_markdown_view
from reflection.postgres.connection import PostgresUnavailable, first_line, is_postgres_url
from reflection.text import clip_middle
from reflection.record_view import agent_is, attempt_bodies, attempt_hits, matching_ids, row_of
from reflection.retention import archive_outcomes
from reflection.rules import read_rules
from reflection.store import ATTEMPT_KIND, JsonlReflectionStore, ReflectionStore, record_created_at

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE = 0, 1, 2
_OLDEST = datetime.min.replace(tzinfo=UTC)  # a record without a readable date sorts last


class MemoryCommandError(Exception):
    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def run_memory(args: argparse.Namespace) -> int:
    library_warnings_to_stderr()  # a line of the memory skipped is said, once, as WARNING: ...
    try:
        project = _project_dir(args.dir)
        return COMMANDS[args.action](args, Layout(project), _config(project))
    except MemoryCommandError as exc:
        return _fail(str(exc), exc.code)
    except (PostgresUnavailable, MemoryFileError) as exc:
        return _fail(str(exc), EXIT_USAGE)
    except BrokenPipeError:  # `... | head`: the reader had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except sqlite3.Error as exc:
        return _fail(f"the lesson index .openagents/memory/lessons.sqlite cannot be used ({exc}); "
                     "delete it and it is rebuilt from the JSONL files", EXIT_USAGE)
    except Exception as exc:
        if not _from_database(exc):
            raise
        return _fail(f"the database refused the work: {first_line(exc)}", EXIT_USAGE)


def _from_database(exc: Exception) -> bool:
    """An error the PostgreSQL driver raised (a permission, a full disk): told in one line.
    Its messages are the server's, which never hold the connection's password."""
    return type(exc).__module__.split(".")[0] == "psycopg"


def _fail(message: str, code: int) -> int:
    print(f"goldenloop memory: {message}", file=sys.stderr)
    return code


def _project_dir(start: Path) -> Path:
    try:
        return find_project(start)
    except ValueError as exc:
        raise MemoryCommandError(str(exc)) from None


def _config(project: Path) -> ProjectConfig:
    try:
        return load_config(project).config
    except ConfigError as exc:
        raise MemoryCommandError(str(exc)) from None


@contextmanager
def _store(layout: Layout, config: ProjectConfig) -> Iterator[ReflectionStore]:
    """The store project.json names, closed afterwards."""
    try:
        store = configured_store(config, layout.project_dir)
    except ConfigError as exc:
        raise MemoryCommandError(str(exc)) from None
    try:
        yield store
    finally:
        store.close()


@contextmanager
def _lessons(layout: Layout, config: ProjectConfig) -> Iterator[LessonRanker]:
    """The lesson ranking of the store project.json names, closed afterwards."""
    try:
        url = memory_store_url(config.memory.store)
    except ConfigError as exc:
        raise MemoryCommandError(str(exc)) from None
    key = project_key(config, layout.project_dir) if url else ""
    index = open_lesson_index(url, layout.reflections.parent, project=key)
    try:
        yield index
    finally:
        index.close()


def _out(args: argparse.Namespace, data: Any, text: Callable[[], str]) -> int:
    if args.json:
        sys.stdout.write(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(text())
    return EXIT_OK


# -- list, show -------------------------------------------------------------------------


def _records(store: ReflectionStore, archived: bool) -> list[OutcomeReflection]:
    return store.archived_outcomes() if archived else store.outcomes()


_COLUMN_MOST = 28  # a longer task id or agent name is clipped in the middle, keeping the columns


def _list(args: argparse.Namespace, layout: Layout, config: ProjectConfig) -> int:
    """Every reflection, attempt and outcome alike (`--kind` narrows), newest first."""
    with _store(layout, config) as store:
        found = [r.to_dict() for r in _records(store, args.archived)] if args.kind != ATTEMPT_KIND else []
        if args.kind in (None, ATTEMPT_KIND):
            found += attempt_bodies(store, archived=args.archived)
    rows = [(body, row_of(body)) for body in found]
    rows = [(body, row) for body, row in rows
            if args.kind in (None, row.kind) and (args.agent is None or agent_is(row, args.agent))]
    rows.sort(key=lambda item: record_created_at(item[0]) or _OLDEST, reverse=True)
    rows = rows[: args.limit]

    def table() -> str:
        if not rows:
            filtered = args.kind is not None or args.agent is not None
            where = " in the archive" if args.archived else ""
            return f"no reflection{where} matches" if filtered else f"no reflections{where} yet"
        cells = [(r.created_at, r.kind, r.task_id, r.agent) for _, r in rows]
        widths = [min(max(len(c[i]) for c in cells), _COLUMN_MOST) for i in range(4)]
        return "\n".join(
            "  ".join(clip_middle(c, w).ljust(w) for c, w in zip(cell, widths, strict=True)) + f"  {r.title}  [{r.id}]"
            for cell, (_, r) in zip(cells, rows, strict=True))

    return _out(args, [body for body, _ in rows], table)


def _show(args: argparse.Namespace, layout: Layout, config: ProjectConfig) -> int:
    """One reflection by its id or a unique start of it; an outcome as its page for people."""
    if not args.id.strip():  # an empty start would match every id
        raise MemoryCommandError("show needs an id or the start of one (memory list shows them)")
    with _store(layout, config) as store:
        body = store.find(args.id) or _by_prefix(store, args.id)
    if body is None:
        return _show_lesson(args, layout, config)
    if body.get("kind") == "outcome":
        with suppress_invalid():
            record = OutcomeReflection.model_validate(body)
            return _out(args, record.to_dict(), lambda: _page(record))
    return _out(args, body, lambda: "\n".join(f"{k}: {_plain(v)}" for k, v in body.items()))


def _by_prefix(store: ReflectionStore, prefix: str) -> dict[str, Any] | None:
    """The one record whose id starts with `prefix`; None when none does; an error naming
    them when several do."""
    ids = matching_ids(store, prefix)
    if len(ids) > 1:
        shown = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
        raise MemoryCommandError(f"{len(ids)} reflections have an id starting with {prefix} ({shown}); "
                                 "give more of the id")
    return store.find(ids[0]) if ids else None


def _page(record: OutcomeReflection) -> str:
    """The record's markdown page without the machine's comment that closes it."""
    lines = to_markdown(record).splitlines()
    return "\n".join(line for line in lines if not line.startswith(MARKER)).rstrip()


def _show_lesson(args: argparse.Namespace, layout: Layout, config: ProjectConfig) -> int:
    """A lesson `memory search` listed that is no record of this project: another project's,
    in a memory the team shares."""
    with _lessons(layout, config) as index:
        lesson = index.get(args.id)
    if lesson is None:
        raise MemoryCommandError(f"no reflection with id {args.id}", EXIT_NOT_FOUND)
    data = {"id": lesson.id, "project": lesson.project or None, "taskId": lesson.task_id, "kind": lesson.kind,
            "text": lesson.text, "rule": lesson.rule, "files": list(lesson.files), "createdAt": lesson.created_at}
    owner = f"project {lesson.project}, " if lesson.project else ""
    return _out(args, data, lambda: "\n".join([f"a lesson of {owner}task {lesson.task_id} ({lesson.kind}, "
                                               f"{lesson.created_at or 'undated'})", lesson.text,
                                               *([f"rule: {lesson.rule}"] if lesson.rule else [])]))


@contextmanager
def suppress_invalid() -> Iterator[None]:
    """An outcome record this version cannot read is shown as its plain keys instead."""
    try:
        yield
    except ValueError:
        pass


def _plain(value: Any) -> str:
    return "; ".join(map(str, value)) if isinstance(value, list) else str(value)


# -- search, rules --------------------------------------------------------------------


def _search(args: argparse.Namespace, layout: Layout, config: ProjectConfig) -> int:
    """Lessons ranked as the loop ranks them, and attempt reflections by the same measure."""
    if not args.text.strip():
        raise MemoryCommandError("search needs some words to look for")
    with _lessons(layout, config) as index:
        ranked = index.search(args.text, args.limit) if args.kind != ATTEMPT_KIND else []
    if args.kind in (None, ATTEMPT_KIND):
        with _store(layout, config) as store:
            ranked += attempt_hits(store, args.text, args.limit)
    ranked = [r for r in ranked if r.score > 0 and args.kind in (None, r.lesson.kind)]
    ranked = sorted(ranked, key=lambda r: r.score, reverse=True)[: args.limit]
    data = [{"id": r.lesson.id, "taskId": r.lesson.task_id, "kind": r.lesson.kind, "score": round(r.score, 4),
             "text": r.lesson.text, "why": r.why, **({"project": r.lesson.project} if r.lesson.project else {})}
            for r in ranked]

    def table() -> str:
        if not ranked:
            return "no reflection matches" if args.kind == ATTEMPT_KIND else "no lesson matches"
        return "\n".join(f"{r.score:6.3f}  {r.lesson.kind:<8} {_task_of(r):<10} {r.lesson.text}  [{r.lesson.id}]"
                          for r in ranked)

    return _out(args, data, table)


def _task_of(ranked: RankedLesson) -> str:
    """The lesson's task, with its project when another project of a shared memory taught it."""
    lesson = ranked.lesson
    return f"{lesson.project}/{lesson.task_id}" if lesson.project else lesson.task_id


def _rules(args: argparse.Namespace, layout: Layout, config: ProjectConfig) -> int:
    memory_dir = layout.reflections.parent
    rules = read_rules(memory_dir)
    with _lessons(layout, config) as index:
        proven = [(lesson, shown, helped) for lesson, shown, helped in index.proven(1) if lesson.rule]
    candidates = [{"rule": lesson.rule, "lessonId": lesson.id, "shown": shown, "helped": helped}
                  for lesson, shown, helped in proven if lesson.rule not in rules]
    data = {"rules": rules, "candidates": candidates, "minPasses": config.memory.rule_min_passes}

    def text() -> str:
        lines = [f"rules in {memory_dir / 'rules.md'} (every prompt carries them):"]
        lines += [f"  - {rule}" for rule in rules] or ["  (none yet)"]
        lines.append(f"candidates (promoted after {config.memory.rule_min_passes} passes):")
        lines += [f"  - {c['rule']}  (helped {c['helped']} of {c['shown']})" for c in candidates] or ["  (none)"]
        return "\n".join(lines)

    return _out(args, data, text)


# -- prune, archive, export -----------------------------------------------------------


def _prune(args: argparse.Namespace, layout: Layout, config: ProjectConfig) -> int:
    days = args.older_than if args.older_than is not None else config.reflexion.retention_days
    with _store(layout, config) as store:
        moved = store.prune(datetime.now(UTC) - timedelta(days=days))
        where = _archive_of(store, layout)
    return _out(args, {"moved": moved, "olderThanDays": days, "archive": str(where)},
                lambda: f"moved {moved} reflection(s) older than {days} days to {where}")


def _archive_of(store: ReflectionStore, layout: Layout) -> str:
    """Where the store's archive is, for people."""
    if isinstance(store, JsonlReflectionStore):
        return str(store.archive_dir)
    return f"the archive of {store.location}"


def _archive(args: argparse.Namespace, layout: Layout, config: ProjectConfig) -> int:
    keep = args.keep if args.keep is not None else config.memory.live_per_agent
    memory_dir = layout.reflections.parent
    with _store(layout, config) as store:
        moved = archive_outcomes(store, keep_per_agent=keep)
        live, old = store.outcomes(), store.archived_outcomes()
        where = _archive_of(store, layout)
    write_markdown_view(live, memory_dir, archived=old)
    return _out(args, {"moved": moved, "keptPerAgent": keep},
                lambda: f"moved {moved} task reflection(s) beyond the newest {keep} per agent to "
                        f"{where}; markdown view updated")


def _export(args: argparse.Namespace, layout: Layout, config: ProjectConfig) -> int:
    memory_dir = layout.reflections.parent
    with _store(layout, config) as store:
        live, old = store.outcomes(), store.archived_outcomes()
    if args.markdown and args.out is not None:
        raise MemoryCommandError("--markdown rebuilds .openagents/memory/reflections/ in place; --out does not apply")
    if args.markdown:
        pages = write_markdown_view(live, memory_dir, archived=old)
        print(f"wrote the markdown view: {len(pages)} page(s) under {memory_dir / 'reflections'}")
        return EXIT_OK
    lines = b"".join(record.to_json_line() for record in (*old, *live))
    if args.out is None:
        sys.stdout.buffer.write(lines)
    else:
        try:
            args.out.write_bytes(lines)
        except OSError as exc:
            raise MemoryCommandError(f"cannot write {args.out}: {exc.strerror or exc}") from None
        print(f"exported {len(old) + len(live)} task reflection(s) to {args.out}")
    return EXIT_OK


# -- migrate ----------------------------------------------------------------------------


def _migrate(args: argparse.Namespace, layout: Layout, config: ProjectConfig) -> int:
    """Copy the memory from --from (default: the store project.json names) to --to."""
    from reflection.migrate import migrate, open_memory, same_memory

    target = _named_memory(args.to, "--to")
    source = _named_memory(args.source, "--from") if args.source else _configured_url(config)
    if same_memory(source, target):
        raise MemoryCommandError(f"--from and --to both name {_shown(source, layout)}: nothing to copy")
    key = project_key(config, layout.project_dir)
    memory_dir = layout.reflections.parent
    src = open_memory(source, memory_dir, project=key)
    try:
        dst = open_memory(target, memory_dir, project=key)
        try:
            report = migrate(src, dst)
        except OSError as exc:
            raise MemoryCommandError(f"cannot write to {memory_dir}: {exc.strerror or exc}") from None
        finally:
            dst.close()
    finally:
        src.close()
    where = f"from {_shown(source, layout)} to {_shown(target, layout)}"

    def text() -> str:
        lines = [f"copied {report.copied} record(s) {where}; {report.already_there} already there, "
                 f"skipped {report.skipped} unreadable line(s)",
                 f"lesson uses: copied {report.uses_copied}, {report.uses_already_there} already there, "
                 f"skipped {report.uses_skipped} unreadable line(s)"]
        if is_postgres_url(target) and not same_memory(target, _configured_url(config)):
            lines.append('to use it, set memory.store to "env:VARIABLE" in .openagents/project.json, with the '
                         "URL in that variable (or set GOLDENLOOP_MEMORY_STORE)")
        return "\n".join(lines)

    return _out(args, {**report.to_dict(), "from": _shown(source, layout), "to": _shown(target, layout),
                       "project": key}, text)


def _named_memory(value: str, flag: str) -> str | None:
    """The memory a --to or --from value names: None for the JSONL files, else its URL."""
    if value == "jsonl":
        return None
    problem = store_problem(value, in_file=False)
    if problem:
        raise MemoryCommandError(f"{flag} {problem}")
    try:
        return memory_store_url(value)
    except ConfigError as exc:
        raise MemoryCommandError(f"{flag}: {exc}") from None


def _configured_url(config: ProjectConfig) -> str | None:
    try:
        return memory_store_url(config.memory.store)
    except ConfigError as exc:
        raise MemoryCommandError(str(exc)) from None


def _shown(url: str | None, layout: Layout) -> str:
    """A memory for people: the folder of the JSONL files, or the URL without its password."""
    return str(layout.reflections.parent) if url is None else describe(url)


COMMANDS: dict[str, Callable[[argparse.Namespace, Layout, ProjectConfig], int]] = {
    "list": _list, "show": _show, "search": _search, "rules": _rules,
    "prune": _prune, "archive": _archive, "export": _export, "migrate": _migrate,
}
