"""`goldenloop worker`, `goldenloop enqueue`, `goldenloop fleet status|report|cancel` and `overnight --queue`.

The queue's URL comes from `--queue`, else from `GOLDENLOOP_QUEUE` (so that a password
stays out of the shell's history and of `ps`); libpq's `PGPASSWORD` and `~/.pgpass`
work too. A worker folds the password into its own copy of the URL and removes both
variables from its environment, so the agents and checks it runs never see them. Every
URL printed goes through `safe_url`. A problem the user can fix (no queue, a database
that cannot be reached, a repository that cannot be cloned, a run that does not exist or
an id that is not a run's) is one sentence and an exit code (docs/FLEET.md lists them),
never a traceback. What the commands print is `orchestrator.fleet.show`'s.
"""

from __future__ import annotations

import argparse
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
    once_per_process,
    password_in,
    safe_url,
    server_gone,
)

QUEUE_ENV = "GOLDENLOOP_QUEUE"
FOLLOW_POLL_S = 1.0
EXIT_NO_RUN = 1  # no such run (or a cancelled one, to add to), or an id that is not a run's


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
    from orchestrator.fleet.schema import open_database

    return open_database(url).open_now()


def _no_run(exc: Exception) -> bool:
    from orchestrator.fleet.records import NoRun  # the fleet is imported late, as psycopg is

    return isinstance(exc, NoRun)


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
    except BrokenPipeError:  # `fleet status | head`: the reader had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_DONE
    except ImportError as exc:  # the postgres extra is not installed
        if (exc.name or "").split(".")[0] not in ("procrastinate", "psycopg", "psycopg_pool"):
            raise
        say(f"{command}: a fleet needs {exc.name}, which is not installed: {INSTALL_HINT}", json_mode,
            level="error", exitCode=EXIT_USAGE)
        return EXIT_USAGE
    except Exception as exc:  # the database went away under the command (the queue's own error, or psycopg's)
        if _no_run(exc):
            say(f"{command}: {exc}", json_mode, level="error", exitCode=EXIT_NO_RUN)
            return EXIT_NO_RUN
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
    from orchestrator.fleet.logs import quiet_queue_logs

    listener = setup_output(args.json)
    quiet_queue_logs()
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
    once_per_process()  # schema checks and settings per worker, not per job
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
    from orchestrator.fleet import show
    from orchestrator.fleet.enqueue import Limits, enqueue
    from orchestrator.fleet.records import check_run_id

    url = queue_url(args)
    check_run_id(args.run)  # before anything is cloned
    if args.run and (args.max_tasks, args.max_hours, args.max_cost) != (None, None, None):
        say(f"the limits given are not used: run {args.run} keeps the limits it was started with", args.json,
            level="warning")
    db = await anyio.to_thread.run_sync(_database, url)
    limits = Limits(args.max_tasks, args.max_hours, args.max_cost)
    try:
        done = await enqueue(db, url, list(args.repos), workdir=args.workdir.expanduser(), limits=limits,
                             run_id=args.run)
    finally:
        db.close()
    show.enqueued(done, args.json, new_run=args.run is None)
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
    if not done.queued or done.run is None:
        if done.run is not None:
            say(f"follow run {done.run.id} with `goldenloop fleet status {done.run.id} --follow`", args.json)
        return EXIT_NO_TASK
    return await _follow_and_report(queue_url(args), done.run.id, args.out, args.workdir, args.json)


async def _follow_and_report(url: str, run_id: str, out: Path, workdir: Path, json_mode: bool) -> int:
    from orchestrator.fleet import show

    db = await anyio.to_thread.run_sync(_database, url)
    try:
        followed, interrupted = await interruptible(lambda: _follow(db, run_id, json_mode))
        if interrupted or followed is None:
            say(f"stopped following run {run_id}; the workers go on. Follow it again with `goldenloop fleet status "
                f"{run_id} --follow`, or write its report now with `goldenloop fleet report {run_id}`", json_mode)
            return EXIT_INTERRUPTED
        report = await anyio.to_thread.run_sync(lambda: _load_report(db, run_id, workdir.expanduser()))
        show.report(report, out.expanduser(), json_mode)
        return EXIT_DONE if all(status == "closed" for status in report.last_status().values()) else EXIT_BLOCKED
    finally:
        db.close()


async def _follow(db, run_id: str, json_mode: bool) -> bool:  # noqa: ANN001 - Database, imported late
    """Print each job's end as it comes, and once that no worker runs while jobs wait;
    True once no job of the run is left."""
    from orchestrator.fleet import show
    from orchestrator.fleet.liveness import NoWorkerWatch, live_workers
    from orchestrator.fleet.records import RUNNING

    shown: set[int] = set()
    watch = NoWorkerWatch()
    while True:
        report = await anyio.to_thread.run_sync(_load_report, db, run_id)
        for row in report.rows:
            if row.status != RUNNING and row.id not in shown:
                shown.add(row.id)
                show.row(row, json_mode)
        if report.finished:
            return True
        warning = watch.check(report.jobs, await anyio.to_thread.run_sync(live_workers, db))
        if warning:
            say(warning, json_mode, level="warning")
        await anyio.sleep(FOLLOW_POLL_S)


def _load_report(db, run_id: str | None, workdir: Path | None = None):  # noqa: ANN001, ANN202
    """The run's report; with `workdir`, its repositories' backlogs read at their remote tips
    through the mirrors there (a report at the end, not each poll of a follower)."""
    from orchestrator.fleet import records
    from orchestrator.fleet.backlog import read_backlogs, runs_of_tasks
    from orchestrator.fleet.queue import run_jobs
    from orchestrator.fleet.report import FleetReport

    run = records.find_run(db, run_id)
    rows, jobs = records.outcomes(db, run.id), run_jobs(db, run.id)
    counts: dict[str, int] = {}
    for job in jobs:
        counts[job.state] = counts.get(job.state, 0) + 1
    if workdir is None:  # a follower's poll, or a status: rows and jobs are all it shows
        return FleetReport(run, rows, counts)
    repositories = records.repositories(db, run.id) or _repositories_of(jobs)
    return FleetReport(run, rows, counts, repositories, read_backlogs(workdir, repositories, runs_of_tasks(rows, jobs)))


def _repositories_of(jobs):  # noqa: ANN001, ANN202 - a run recorded before its repositories were
    from orchestrator.fleet.records import RunRepository

    found = {job.repo_key: RunRepository(job.repo, job.repo_key, job.branch) for job in reversed(jobs) if job.repo}
    return list(reversed(found.values()))


# -- fleet status | report | cancel ---------------------------------------------------------


def run_fleet(args: argparse.Namespace) -> int:
    setup_output(args.json)
    return _guarded(f"fleet {args.action}", args.json, lambda: anyio.run(_fleet, args))


async def _fleet(args: argparse.Namespace) -> int:
    from orchestrator.fleet import show
    from orchestrator.fleet.liveness import live_workers
    from orchestrator.fleet.records import check_run_id, find_run

    url = queue_url(args)
    check_run_id(args.run)
    db = await anyio.to_thread.run_sync(_database, url)
    try:
        run = await anyio.to_thread.run_sync(find_run, db, args.run)
        if args.action == "cancel":
            return await _cancel(db, url, run, args)
        if args.action == "status" and args.follow:
            return await _follow_and_report(url, run.id, args.out, args.workdir, args.json)
        if args.action == "report":
            report = await anyio.to_thread.run_sync(_load_report, db, run.id, args.workdir.expanduser())
            show.report(report, args.out.expanduser(), args.json)
        else:
            report = await anyio.to_thread.run_sync(_load_report, db, run.id)
            show.status(report, await anyio.to_thread.run_sync(live_workers, db), args.json)
    finally:
        db.close()
    return EXIT_DONE


async def _cancel(db, url: str, run, args: argparse.Namespace) -> int:  # noqa: ANN001 - fleet types, imported late
    from orchestrator.fleet import show
    from orchestrator.fleet.cancel import cancel

    show.cancelled(await cancel(db, url, run, abort=args.abort), args.json)
    return EXIT_DONE
