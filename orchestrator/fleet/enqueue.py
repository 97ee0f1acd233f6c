"""Put the ready tasks of repositories on the fleet's queue, as one run with one budget.

Every repository is checked before anything is written: its URL must carry no password
(the queue stores URLs, and a worker's git takes credentials from its machine), it must
clone or fetch, and its default branch must hold `.openagents/tasks.jsonl`. Then the run
is created (or, with an existing `--run`, added to) and each repository's ready tasks
are queued under its integration lock, exactly as a worker queues the tasks that an
integration made ready.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import anyio

from orchestrator.fleet import records
from orchestrator.fleet.locks import AdvisoryLocks, repository_key
from orchestrator.fleet.mirror import GitFailed, Mirrors, RepoRef
from orchestrator.fleet.queue import Deferred, defer_ready, make_app, ready_at
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
    run: records.Run
    repositories: list[tuple[RepoRef, Deferred]] = field(default_factory=list)

    @property
    def queued(self) -> int:
        return sum(len(d.queued) + len(d.waiting) for _, d in self.repositories)


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
    """Check every repository, create the run, queue each one's ready tasks."""
    mirrors = Mirrors(workdir)
    checked = [await anyio.to_thread.run_sync(check_repository, mirrors, repo) for repo in repositories]
    run = await anyio.to_thread.run_sync(lambda: records.create_run(
        db, run_id or new_run_id(), max_tasks=limits.max_tasks, max_hours=limits.max_hours, max_cost=limits.max_cost))
    done = Enqueued(run)
    app, locks = make_app(url), AdvisoryLocks(url)
    try:
        async with app.open_async():
            for ref, ready in checked:
                async with locks.hold(repository_key(ref.address)):
                    done.repositories.append((ref, await defer_ready(app, db, run.id, ref, ready)))
    finally:
        locks.close()
    return done
