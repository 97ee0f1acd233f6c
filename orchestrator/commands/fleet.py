"""`goldenloop worker`, `goldenloop enqueue`, `goldenloop fleet status|report` and `overnight --queue`.

The queue's URL comes from `--queue`, else from `GOLDENLOOP_QUEUE` (so that a password
stays out of the shell's history and of `ps`); libpq's `PGPASSWORD` and `~/.pgpass`
work too. A worker folds the password into its own copy of the URL and removes both
variables from its environment, so the agents and checks it runs never see them. Every
URL printed goes through `safe_url`. A problem the user can fix (no queue, a database
that cannot be reached, a repository that cannot be cloned) is one sentence and an exit
code (docs/FLEET.md lists them), never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio

from orchestrator.commands.console import interruptible, say, setup_output
from orchestrator.render import JsonLines
from orchestrator.session import (
    EXIT_BLOCKED,
    EXIT_DONE,
    EXIT_INTERRUPTED,
    EXIT_NO_TASK,
    EXIT_USAGE,
    Overrides,
    UserError,
)
from reflection.llm import preload_litellm
from reflection.postgres.connection import (
    INSTALL_HINT,
    PostgresUnavailable,
    connect,
    first_line,
    is_postgres_url,
    password_in,
    safe_url,
    server_gone,
)

QUEUE_ENV = "GOLDENLOOP_QUEUE"
FOLLOW_POLL_S = 1.0


def queue_url(args: argparse.Namespace, *, scrub: bool = False) -> str:
    """The queue's URL; with `scrub`, the password moves from the environment into it."""
    url = getattr(args, "queue", None) or os.environ.get(QUEUE_ENV)
    if not url:
        raise UserError(f"no queue: pass --queue postgresql://... or set {QUEUE_ENV}", EXIT_USAGE)
    if not is_postgres_url(url):
        raise UserError(f"--queue must be a postgresql:// URL, not {safe_url(url)!r}", EXIT_USAGE)
    if scrub:
        password = os.environ.pop("PGPASSWORD", None)
        os.environ.pop(QUEUE_ENV, None)
        if password and not password_in(url):
            parts = urlsplit(url)
            query = urlencode([*parse_qsl(parts.query, keep_blank_values=True), ("password", password)])
            url = urlunsplit((parts.scheme, parts.netloc, parts.path, query, parts.fragment))
    return url


def _database(url: str):  # noqa: ANN202 - Database, imported late with psycopg
    """The fleet's database, reached once now: a wrong URL is said at once, not after the
    half minute a connection waits for a server that went away."""
    from orchestrator.fleet.schema import open_database, prepare

    with connect(url) as conn:
        prepare(conn)
    return open_database(url)


def _guarded(command: str, json_mode: bool, work: Callable[[], int]) -> int:
    """Run a command; a UserError or an unreachable database ends it in one sentence."""
    try:
        return work()
    except UserError as exc:
        say(f"{command}: {exc}", json_mode, level="error", exitCode=exc.exit_code)
        return exc.exit_code
    except PostgresUnavailable as exc:
        say(f"{command}: {exc}", json_mode, level="error", exitCode=EXIT_USAGE)
        return EXIT_USAGE
    except ImportError as exc:  # the postgres extra is not installed
        if (exc.name or "").split(".")[0] not in ("procrastinate", "psycopg", "psycopg_pool"):
            raise
        say(f"{command}: a fleet needs {exc.name}, which is not installed: {INSTALL_HINT}", json_mode,
            level="error", exitCode=EXIT_USAGE)
        return EXIT_USAGE
    except Exception as exc:  # the database went away under the command (the queue's own error, or psycopg's)
        cause = exc.__cause__ or exc
        if not server_gone(cause):
            raise
        say(f"{command}: the queue's database did not answer: {first_line(cause)}", json_mode, level="error",
            exitCode=EXIT_USAGE)
        return EXIT_USAGE
    except KeyboardInterrupt:
        say(f"{command}: interrupted", json_mode, level="error")
        return EXIT_INTERRUPTED


# -- worker --------------------------------------------------------------------------------


def run_worker(args: argparse.Namespace) -> int:
    listener = setup_output(args.json)
    _queue_logs_in_one_line()
    return _guarded("worker", args.json, lambda: anyio.run(_worker, args, listener))


async def _worker(args: argparse.Namespace, listener: Callable[[dict], None]) -> int:
    from orchestrator.fleet.queue import make_app
    from orchestrator.fleet.serve import Serving
    from orchestrator.fleet.worker import FleetWorker, WorkerSettings

    url = queue_url(args, scrub=True)
    name = args.name or f"{socket.gethostname()}-{os.getpid()}"
    memory = url if args.memory is None else args.memory
    if memory != "project" and not is_postgres_url(memory):
        raise UserError("--memory must be a postgresql:// URL or 'project'", EXIT_USAGE)
    overrides = Overrides(model=args.model, api_base=args.api_base, memory_store=memory)
    settings = WorkerSettings(url, args.workdir.expanduser(), name, args.lease, overrides, args.until_empty)
    db = await anyio.to_thread.run_sync(_database, url)
    if memory not in ("project", url):  # a wrong --memory is said now, not as every job's failure
        await anyio.to_thread.run_sync(lambda: connect(memory).close())
    app = make_app(url)
    worker = FleetWorker(settings, db, app, _sayer(name, args.json), listener)
    serving = Serving(worker, app)
    try:
        swept = worker.trees.open()
        worker.say(f"worker {name} on {safe_url(url)}, lease {args.lease:g} s, workdir {settings.workdir}"
                   + (f"; removed what dead worker(s) left: {', '.join(swept)}" if swept else ""))
        preload_litellm()  # seconds of import, in a thread, while the first job is fetched
        await app.open_async()
        try:
            await serving.serve()
        finally:
            if not serving.stuck:
                await app.close_async()
    finally:
        worker.trees.close()
        worker.locks.close()
        db.close()
    code = EXIT_INTERRUPTED if serving.interrupted else EXIT_DONE
    if serving.stuck:  # the queue's tasks wait on a database that is away: leave without them
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


class _OneLine(logging.Formatter):
    """A record and the first line of its exception: a database restart is news, not a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        cause = record.exc_info[1] if record.exc_info else None
        text = f"{record.levelname}: {_first(record.getMessage())}"
        return text + (f" ({type(cause).__name__}: {_first(str(cause))})" if cause else "")


def _first(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else ""


def _queue_logs_in_one_line() -> None:
    """Procrastinate's and asyncio's warnings as one line each on stderr."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine())
    for name in ("procrastinate", "asyncio", "psycopg"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(logging.WARNING)
        logger.propagate = False


def _sayer(name: str, json_mode: bool) -> Callable[[str], None]:
    def speak(message: str) -> None:
        if json_mode:
            JsonLines()({"event": "worker", "worker": name, "message": message})
        else:
            print(f"{time.strftime('%H:%M:%S')} [{name}] {message}", flush=True)

    return speak


# -- enqueue and overnight --queue ---------------------------------------------------------


def run_enqueue(args: argparse.Namespace) -> int:
    setup_output(args.json)
    return _guarded("enqueue", args.json, lambda: anyio.run(_enqueue_command, args))


async def _enqueue_command(args: argparse.Namespace) -> int:
    done = await _enqueue(args)
    return EXIT_DONE if done.queued else EXIT_NO_TASK


async def _enqueue(args: argparse.Namespace):  # noqa: ANN202 - Enqueued, imported late
    from orchestrator.fleet.enqueue import Limits, enqueue

    url = queue_url(args)
    db = await anyio.to_thread.run_sync(_database, url)
    limits = Limits(args.max_tasks, args.max_hours, args.max_cost)
    try:
        done = await enqueue(db, url, list(args.repos), workdir=args.workdir.expanduser(), limits=limits,
                             run_id=args.run)
    finally:
        db.close()
    if args.json:
        JsonLines()({"event": "enqueued", "runId": done.run.id, "repositories": [
            {"repository": safe_url(ref.url), "branch": ref.branch, "queued": d.queued, "alreadyQueued": d.waiting}
            for ref, d in done.repositories]})
    else:
        print(f"run {done.run.id}", flush=True)
        for ref, d in done.repositories:
            waiting = f" ({len(d.waiting)} already on the queue: {', '.join(d.waiting)})" if d.waiting else ""
            print(f"  {safe_url(ref.url)} ({ref.branch}): queued {len(d.queued)}"
                  f"{': ' + ', '.join(d.queued) if d.queued else ''}{waiting}", flush=True)
        if not done.queued:
            print("no ready task in any repository", flush=True)
    return done


def run_overnight_fleet(args: argparse.Namespace) -> int:
    """`overnight --queue URL REPO_URL...`: enqueue, follow the run to its end, write its report."""
    setup_output(args.json)
    for flag in ("parallel", "model", "api_base", "max_retries"):
        if getattr(args, flag, None) is not None:
            return _guarded("overnight", args.json, _refuse(f"--{flag.replace('_', '-')} is a worker's setting with "
                                                            "--queue: pass it to `goldenloop worker`"))
    if args.no_reflexion or args.allow_dirty:
        return _guarded("overnight", args.json, _refuse("--no-reflexion and --allow-dirty are not for --queue runs"))
    args.repos = args.dirs  # with --queue, overnight's DIRs are the repositories' URLs
    return _guarded("overnight", args.json, lambda: anyio.run(_overnight, args))


def _refuse(message: str) -> Callable[[], int]:
    def refuse() -> int:
        raise UserError(message, EXIT_USAGE)

    return refuse


async def _overnight(args: argparse.Namespace) -> int:
    done = await _enqueue(args)
    if not done.queued:
        return EXIT_NO_TASK
    return await _follow_and_report(queue_url(args), done.run.id, args.out, args.json)


async def _follow_and_report(url: str, run_id: str, out: Path, json_mode: bool) -> int:
    from orchestrator.fleet.report import FleetReport

    db = await anyio.to_thread.run_sync(_database, url)
    try:
        report, interrupted = await interruptible(lambda: _follow(db, run_id, json_mode))
        if interrupted or report is None:
            say(f"stopped following run {run_id}; the workers go on. Follow it again with `goldenloop fleet status "
                f"{run_id} --follow`, or write its report now with `goldenloop fleet report {run_id}`", json_mode)
            return EXIT_INTERRUPTED
        assert isinstance(report, FleetReport)
        _print_report(report, out.expanduser(), json_mode)
        return EXIT_DONE if all(status == "closed" for status in report.last_status().values()) else EXIT_BLOCKED
    finally:
        db.close()


async def _follow(db, run_id: str, json_mode: bool):  # noqa: ANN001, ANN202 - fleet types, imported late
    """Print each job's end as it comes; return the report once no job of the run is left."""
    from orchestrator.fleet.records import RUNNING

    shown: set[int] = set()
    while True:
        report = await anyio.to_thread.run_sync(_load_report, db, run_id)
        for row in report.rows:
            if row.status != RUNNING and row.id not in shown:
                shown.add(row.id)
                _print_row(row, json_mode)
        if report.finished:
            return report
        await anyio.sleep(FOLLOW_POLL_S)


def _load_report(db, run_id: str | None):  # noqa: ANN001, ANN202
    from orchestrator.fleet import records
    from orchestrator.fleet.queue import job_counts
    from orchestrator.fleet.report import FleetReport

    run = records.get_run(db, run_id)
    if run is None:
        raise UserError(f"no run {run_id} on this queue" if run_id else "no run on this queue yet", 1)
    return FleetReport(run, records.outcomes(db, run.id), job_counts(db, run.id))


def _print_row(row, json_mode: bool) -> None:  # noqa: ANN001
    name = row.repo_key.rsplit("-", 1)[0]
    if json_mode:
        JsonLines()({"event": "job_ended", "repository": row.repo, "taskId": row.task_id, "status": row.status,
                     "reason": row.reason, "worker": row.worker, "costUsd": row.cost, "durationS": row.duration_s})
        return
    cost = "unknown" if row.cost is None else f"${row.cost:.4f}"
    why = f": {row.reason}" if row.status != "closed" and row.reason else ""
    print(f"{name} {row.task_id}: {row.status} by {row.worker} ({row.attempts} attempt(s), {cost}, "
          f"{row.duration_s:.1f} s){why}", flush=True)


def _print_report(report, out: Path, json_mode: bool) -> None:  # noqa: ANN001
    summary, page = report.write(out)
    body = report.summary()
    if json_mode:
        JsonLines()({"event": "summary", **body, "summaryPath": str(summary), "reportPath": str(page)})
        return
    t = body["totals"]
    cost = "unknown" if t["costUsd"] is None else f"${t['costUsd']:.4f}"
    print(f"run {body['runId']}: {t['closed']} of {t['tasks']} task(s) closed, {t['blocked']} blocked, by "
          f"{len(t['workers'])} worker(s); cost {cost}; stopped because: {body['stopReason']}", flush=True)
    print(f"  summary: {summary}\n  report:  {page}", flush=True)


# -- fleet status | report -----------------------------------------------------------------


def run_fleet(args: argparse.Namespace) -> int:
    setup_output(args.json)
    return _guarded(f"fleet {args.action}", args.json, lambda: anyio.run(_fleet, args))


async def _fleet(args: argparse.Namespace) -> int:
    url = queue_url(args)
    if args.action == "status" and args.follow:
        db = await anyio.to_thread.run_sync(_database, url)
        run_id = args.run or (await anyio.to_thread.run_sync(_load_report, db, None)).run.id
        db.close()
        return await _follow_and_report(url, run_id, args.out, args.json)
    db = await anyio.to_thread.run_sync(_database, url)
    try:
        report = await anyio.to_thread.run_sync(_load_report, db, args.run)
    finally:
        db.close()
    if args.action == "report":
        _print_report(report, args.out.expanduser(), args.json)
    else:
        _print_status(report, args.json)
    return EXIT_DONE


def _print_status(report, json_mode: bool) -> None:  # noqa: ANN001
    body = report.summary()
    if json_mode:
        JsonLines()({"event": "status", **body})
        return
    run, t = report.run, body["totals"]
    limits = [f"{run.max_tasks} tasks" if run.max_tasks else "", f"${run.max_cost:.2f}" if run.max_cost else "",
              f"until {run.deadline:%Y-%m-%d %H:%M} UTC" if run.deadline else ""]
    shown = ", ".join(x for x in limits if x) or "none"
    jobs = ", ".join(f"{k} {v}" for k, v in sorted(report.jobs.items())) or "none"
    print(f"run {run.id} (started {run.created_at:%Y-%m-%d %H:%M} UTC; limits: {shown})", flush=True)
    print(f"  jobs: {jobs}", flush=True)
    spent = f"${run.spent_cost:.4f}" + (f" of ${run.max_cost:.4f}" if run.max_cost is not None else "")
    print(f"  spent {spent}; tasks started {run.started_tasks}; closed {t['closed']}, blocked {t['blocked']}",
          flush=True)
    for row in report.rows[-10:]:
        _print_row(row, False)
    if not report.finished:
        print("  still running", flush=True)
