"""Put the ready tasks of repositories on the fleet's queue, as one run with one budget.

Every repository is checked before anything is written: its URL must carry no password
(the queue stores URLs, and a worker's git takes credentials from its machine), it must
clone or fetch, and its default branch must hold `.openagents/tasks.jsonl`; a `--run`
must name a run of this queue that was not cancelled (a typo must not start a run
without the night's limits). Then, when some task is ready, the run is created (or, with
`--run`, added to), its repositories recorded for its report, and each repository's ready
tasks queued under its integration lock, exactly as a worker queues the tasks that an
integration made ready. Into an existing run a task is queued again when its earlier
jobs there all ended without success. A new run that got no job is deleted: an empty run
must not become the newest, which `fleet status` and `fleet report` pick by default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import anyio

from orchestrator.fleet import records
from orchestrator.fleet.backlog import ready_at
from orchestrator.fleet.locks import AdvisoryLocks, repository_key
from orchestrator.fleet.mirror import GitFailed, Mirrors, RepoRef
from orchestrator.fleet.queue import Deferred, defer_ready, make_app
from orchestrator.runlog import new_run_id
from orchestrator.session import EXIT_USAGE, UserError
from orchestrator.tasks import Task, TaskFileError
from reflection.postgres.connection import Database, password_in, safe_url


@dataclass
class Limits:
    max_tasks: int | None = None
    max_hours: float | None = None
    max_cost: float | None = None


@dataclass
class Enqueued:
    run: records.Run | None  # None: nothing was queued, and no run was created
    repositories: list[tuple[RepoRef, Deferred]] = field(default_factory=list)

    @property
    def queued(self) -> int:
        """How many tasks this call put on the queue."""
        return sum(len(d.queued) for _, d in self.repositories)


def check_repository(mirrors: Mirrors, url: str) -> tuple[RepoRef, list[Task]]:
    """The repository at its default branch and its ready tasks; UserError (one sentence) if unusable."""
    if password_in(url):
        raise UserError(f"{safe_url(url)} carries a password: the queue would store it; give the workers' "
                        "machines the credentials (an SSH key, a git credential helper) and drop it from the URL",
                        EXIT_USAGE)
    ref = RepoRef(url)
    try:
        mirrors.fetch(ref)
        ref = RepoRef(url, mirrors.default_branch(ref))
        return ref, ready_at(mirrors, ref, mirrors.tip(ref))
    except GitFailed as exc:
        raise UserError(f"cannot clone or fetch {url}: {exc}", EXIT_USAGE) from None
    except TaskFileError as exc:
        raise UserError(str(exc), EXIT_USAGE) from None


async def enqueue(db: Database, url: str, repositories: list[str], *, workdir: Path, limits: Limits,
                  run_id: str | None = None) -> Enqueued:
    """Check the run and every repository, then queue each one's ready tasks (see the module)."""
    existing = await anyio.to_thread.run_sync(lambda: records.find_run(db, run_id, to_add=True)) if run_id else None
    mirrors = Mirrors(workdir)
    checked = [await anyio.to_thread.run_sync(check_repository, mirrors, repo) for repo in repositories]
    if existing is None and not any(ready for _, ready in checked):
        return Enqueued(None, [(ref, Deferred()) for ref, _ in checked])
    run = existing or await anyio.to_thread.run_sync(lambda: records.create_run(
        db, new_run_id(), max_tasks=limits.max_tasks, max_hours=limits.max_hours, max_cost=limits.max_cost))
    done = Enqueued(run)
    app, locks = make_app(url), AdvisoryLocks(url)
    try:
        async with app.open_async():
            for ref, ready in checked:
                await anyio.to_thread.run_sync(records.add_repository, db, run.id,
                                               records.RunRepository(ref.url, ref.key, ref.branch))
                async with locks.hold(repository_key(ref.address)):
                    done.repositories.append((ref, await defer_ready(app, db, run.id, ref, ready, again=True)))
    finally:
        locks.close()
    if existing is None and not done.queued:
        await anyio.to_thread.run_sync(records.forget_run, db, run.id)
        done.run = None
    return done
