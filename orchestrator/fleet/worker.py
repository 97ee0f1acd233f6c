"""One job: one task of one repository, from the queue to the repository's base branch.

`FleetWorker.run_job`, step by step:

1. claim a task slot of the run (`orchestrator.fleet.records.claim`): past the deadline,
   the cost budget or the task count, or in a cancelled run, the job ends there and its
   row says why;
2. fetch the repository into this machine's mirror and reset this worker's worktree to
   the remote tip: a fresh tree, whatever an earlier job (or a dead worker) left;
3. open the worktree as a project (`ProjectSession`, with the worker's model and memory
   overrides), put the task's title on its row, and check that the task is still ready
   at the tip (another worker may have closed it, a human may have blocked it);
4. run the golden loop on it with the fleet's ledger as the run's budget, cancelled at
   the run's deadline or when the worker is told to stop (then the task is put back and
   the job goes back to the queue for another worker);
5. integrate a closed or blocked task under the repository's fleet-wide lock
   (`orchestrator.fleet.integrate`), then queue the tasks of the repository that became
   ready, so dependencies are worked through in one run (unless it was cancelled);
6. record the outcome: its status, cost, commits, the lines of its story and its
   escalation packet's path in the repository, for the morning report, and say how the
   task ended on the base branch (a task the loop closed may end blocked by a conflict).

A task put back (budget, interrupted, model unavailable) integrates nothing: the next
run starts it again from the remote tip, as a local rerun would. A job aborted through
the queue (`goldenloop fleet cancel --abort`) is cancelled where it stands: the task is
put back to open in the worktree, nothing is pushed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from procrastinate import App
from procrastinate.jobs import Job

from orchestrator.batch.morning_report import stories_of
from orchestrator.fleet import records
from orchestrator.fleet.integrate import Integration, IntegrationFailed, integrate
from orchestrator.fleet.ledger import FleetLedger
from orchestrator.fleet.locks import AdvisoryLocks, repository_key
from orchestrator.fleet.mirror import GitFailed, Mirrors, RepoRef, WorkerTrees
from orchestrator.fleet.queue import InfraError, PutBack, defer_ready, infrastructure
from orchestrator.loop.outcome import TaskOutcome
from orchestrator.runlog import Event, Listener, RunLog
from orchestrator.session import MemoryUnavailable, Overrides, ProjectSession, UserError
from orchestrator.tasks import TaskFileError
from reflection.llm import price_known
from reflection.meter import Meter
from reflection.postgres.connection import Database, first_line, safe_url

MODEL_ATTEMPTS = 3  # a model call's tries (the client retries transient errors): a hold lasts for all of them
PUT_BACK = ("budget", "interrupted", "model_unavailable")
ABORTED = "the job was aborted (goldenloop fleet cancel --abort); the task was put back to open"
Say = Callable[[str], None]


@dataclass
class WorkerSettings:
    queue_url: str
    workdir: Path
    name: str
    lease_s: float = 60.0
    overrides: Overrides = field(default_factory=Overrides)
    until_empty: bool = False


class FleetWorker:
    """What a worker process does with each job the queue hands it."""

    def __init__(self, settings: WorkerSettings, db: Database, app: App, say: Say,
                 listener: Listener | None = None) -> None:
        self.settings = settings
        self.name = settings.name
        self.db = db
        self.app = app
        self.say = say
        self.listener = listener
        self.mirrors = Mirrors(settings.workdir)
        self.trees = WorkerTrees(settings.workdir, self.mirrors, settings.name)
        self.locks = AdvisoryLocks(settings.queue_url)
        self.stopping = False  # told to stop: the job in flight is put back
        self.busy = False
        self._scope: anyio.CancelScope | None = None

    def stop_job(self) -> None:
        """Stop the task in flight (it is put back and its job returns to the queue)."""
        self.stopping = True
        if self._scope is not None:
            self._scope.cancel()

    # -- the job ------------------------------------------------------------------------

    async def run_job(self, job: Job, *, repo: str, branch: str, task: str, run: str) -> str:
        ref = RepoRef(repo, branch)
        record = records.Job(run, job.id, safe_url(repo), ref.key, task, self.name)
        self.busy = True
        row: int | None = None
        try:
            claimed = await anyio.to_thread.run_sync(records.claim, self.db, record)
            if isinstance(claimed, str):
                self.say(f"{ref.name} {task}: not started: {claimed}")
                return records.SKIPPED
            row, run_row = claimed
            self.say(f"{ref.name} {task}: started (job {job.id})")
            return await self._claimed(ref, record, row, run_row)
        except Exception as exc:
            if isinstance(exc, InfraError | PutBack) or not infrastructure(exc):
                await self._abandon(row, "error", f"{type(exc).__name__}: {first_line(exc)}")
                raise
            self.say(f"{ref.name} {task}: the database went away ({first_line(exc)}); the job will run again")
            await self._abandon(row, "error", f"the database went away: {first_line(exc)}")
            raise InfraError(first_line(exc)) from None
        except BaseException:  # cancelled: the job was aborted through the queue
            self.say(f"{ref.name} {task}: aborted through the queue; the task was put back to open")
            await self._abandon(row, "interrupted", ABORTED)
            raise
        finally:
            self.busy = False

    async def _abandon(self, row: int | None, status: str, reason: str) -> None:
        """A row the job could not finish itself: said how, unless it was already (best effort)."""
        if row is None:
            return
        with anyio.CancelScope(shield=True):
            try:
                await anyio.to_thread.run_sync(records.abandon, self.db, row, status, reason)
            except Exception:  # noqa: BLE001 - the database is away: the next claim marks it lost
                pass

    async def _claimed(self, ref: RepoRef, record: records.Job, row: int, run: records.Run) -> str:
        try:
            tip = await anyio.to_thread.run_sync(self.mirrors.fetch_tip, ref)
            tree = await anyio.to_thread.run_sync(self.trees.prepare, ref, tip)
        except GitFailed as exc:
            await self._finish(row, ref, record.task_id, None, status="error", reason=str(exc))
            raise InfraError(str(exc)) from None
        events: list[Event] = []
        session = ProjectSession(tree, self.settings.overrides, self._runlog(tree, record.run_id, ref, events),
                                 run_meter=Meter())
        try:
            await anyio.to_thread.run_sync(session.open)
        except MemoryUnavailable as exc:  # away now (its URL was checked when the worker started): later
            await self._finish(row, ref, record.task_id, None, status="error", reason=str(exc))
            raise InfraError(str(exc)) from None
        except UserError as exc:
            await self._finish(row, ref, record.task_id, None, status="refused", reason=str(exc))
            return "refused"
        try:
            return await self._in_session(session, ref, record, row, run, tip, events)
        finally:
            session.close()

    def _runlog(self, tree: Path, run_id: str, ref: RepoRef, events: list[Event]) -> RunLog:
        runlog = RunLog(tree, run_id, persist=False)  # the session attaches it to the worktree
        runlog.subscribe(events.append)  # the story, for the outcome row
        if self.listener is not None:
            listener = self.listener
            runlog.subscribe(lambda event: listener({**event, "repo": ref.name, "worker": self.name}))
        return runlog

    async def _in_session(self, session: ProjectSession, ref: RepoRef, record: records.Job, row: int,
                          run: records.Run, tip: str, events: list[Event]) -> str:
        await anyio.to_thread.run_sync(self._title, session, record.task_id, row)
        done_before = await anyio.to_thread.run_sync(self._done_before, session, record, row)
        if done_before is not None:
            await self._finish(row, ref, record.task_id, done_before)
            return done_before.status
        # In a thread: reading a price imports litellm, seconds that must not stall the heartbeat.
        refusal = await anyio.to_thread.run_sync(self._refusal, session, record.task_id, run)
        if refusal:
            await self._finish(row, ref, record.task_id, None, status=records.SKIPPED, reason=refusal)
            return records.SKIPPED
        ledger = FleetLedger(self.db, run.id, session.run_meter, max_cost=run.max_cost, worker=self.name,
                             hold_s=session.config.timeouts.model_seconds * MODEL_ATTEMPTS, row_id=row)
        started = time.monotonic()
        try:
            outcome = await self._run_task(session, record.task_id, ledger, run)
        except PutBack:
            await anyio.to_thread.run_sync(ledger.flush)
            await self._finish(row, ref, record.task_id, _cut_short(session, record.task_id, events, started),
                               status="interrupted", reason="the worker was stopped; the task went back to the queue",
                               events=events)
            raise
        except anyio.get_cancelled_exc_class():  # aborted through the queue: what it spent still counts
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(ledger.flush)
                await self._finish(row, ref, record.task_id, _cut_short(session, record.task_id, events, started),
                                   status="interrupted", reason=ABORTED, events=events)
            raise
        await anyio.to_thread.run_sync(ledger.flush)
        loop_status, kept_on = outcome.status, ""
        if outcome.status not in PUT_BACK:
            try:
                result = await self._integrate(session, ref, outcome, tip, run.id)
            except (GitFailed, IntegrationFailed) as exc:
                await self._finish(row, ref, record.task_id, outcome, status="error", reason=str(exc), events=events)
                raise InfraError(str(exc)) from None
            events = _rebased(events, outcome.commits, result)
            self._apply(outcome, result)
            kept_on = result.branch
        outcome.escalation = _in_repository(outcome.escalation, session.project_dir)
        await self._finish(row, ref, record.task_id, outcome, events=events, loop_status=loop_status, kept_on=kept_on)
        return outcome.status

    def _title(self, session: ProjectSession, task_id: str, row: int) -> None:
        """The task's title on its row now: a job whose worker dies still names its task."""
        try:
            title = session.board.get(task_id).title
        except TaskFileError:
            return
        records.set_title(self.db, row, title)

    def _done_before(self, session: ProjectSession, record: records.Job, row: int) -> TaskOutcome | None:
        """The task as an earlier run of this job left it at the tip, when that run integrated
        it and died before it could record so (a kill between the push and the row)."""
        try:
            task = session.board.get(record.task_id)
        except TaskFileError:
            return None
        if task.status not in ("closed", "blocked") or not records.died_before(self.db, record.job_id, row):
            return None
        return TaskOutcome(task.id, task.status, "integrated by an earlier run of this job, whose worker stopped "
                           "before it could record so", commits=list(task.commits))

    def _refusal(self, session: ProjectSession, task_id: str, run: records.Run) -> str | None:
        """Why this task must not run here and now; None when it may."""
        board = session.board
        if task_id not in {t.id for t in board.ready()}:
            try:
                status = board.get(task_id).status
            except TaskFileError:  # gone from the backlog, or no longer a valid line
                return f"{task_id} is no longer in the backlog"
            return f"{task_id} is already {status}" if status not in ("open", "in_progress") else \
                f"{task_id} waits for tasks that are not closed"
        if not session.config.commit_bookkeeping:
            return "commitBookkeeping is off in project.json, and the fleet keeps the backlog in git"
        if run.max_cost is not None:
            unknown = [m for m in session.models_in_use([board.get(task_id)]) if not price_known(m)]
            if unknown:
                return f"a cost budget is set but the price of {', '.join(unknown)} is unknown"
        return None

    async def _run_task(self, session: ProjectSession, task_id: str, ledger: FleetLedger,
                        run: records.Run) -> TaskOutcome:
        """The golden loop on the task, until it ends, the run's deadline, or a stop."""
        left = run.seconds_left()
        started = time.monotonic()
        scope = anyio.CancelScope(deadline=anyio.current_time() + left if left is not None else math.inf)
        self._scope = scope
        if self.stopping:
            scope.cancel()
        try:
            with scope:
                return await session.run_task(session.board.get(task_id), limits=[ledger], bookkeeping=False)
        finally:
            self._scope = None
        if self.stopping:  # the scope was cancelled, the task put back to open in the worktree
            raise PutBack(f"{task_id} was put back: the worker was stopped")
        return TaskOutcome(task_id, "interrupted", "time budget used up; the task was put back to open",
                           duration_s=time.monotonic() - started)

    async def _integrate(self, session: ProjectSession, ref: RepoRef, outcome: TaskOutcome, tip: str,
                         run_id: str) -> Integration:
        """Integrate under the repository's lock, then queue what became ready (same lock)."""
        async with self.locks.hold(repository_key(ref.address)):
            result = await anyio.to_thread.run_sync(integrate, session, ref, self.mirrors, outcome, tip)
            ready = await anyio.to_thread.run_sync(session.board.ready)
            deferred = await defer_ready(self.app, self.db, run_id, ref, ready)
        if deferred.queued:
            self.say(f"{ref.name}: queued {', '.join(deferred.queued)} (now ready)")
        return result

    @staticmethod
    def _apply(outcome: TaskOutcome, result: Integration) -> None:
        if result.status == "integrated":
            outcome.commits = result.commits
        elif result.status == "conflict":
            outcome.status, outcome.reason, outcome.commits = "blocked", result.reason, []
        else:
            outcome.status, outcome.reason = "dropped", result.reason  # type: ignore[assignment]

    async def _finish(self, row: int, ref: RepoRef, task_id: str, outcome: TaskOutcome | None, *,
                      status: str | None = None, reason: str | None = None, events: list[Event] | None = None,
                      loop_status: str = "", kept_on: str = "") -> None:
        runs = stories_of(events or []).get(task_id, [])
        story = runs[-1] if runs else None
        title, lines = (story.title, story.lines) if story else ("", [])
        if kept_on:
            lines = [_kept_on(line, kept_on, ref.branch) for line in lines]
        with anyio.CancelScope(shield=True):  # the row is the morning's record: written however the job ends
            await anyio.to_thread.run_sync(lambda: records.finish(self.db, row, outcome, status=status, reason=reason,
                                                                  title=title or None, story=lines))
        shown = status or (outcome.status if outcome else "")
        why = reason if reason is not None else (outcome.reason if outcome and outcome.status != "closed" else "")
        self.say(f"{ref.name} {task_id}: {_end_state(shown, loop_status, ref.branch)}" + (f": {why}" if why else ""))


def _cut_short(session: ProjectSession, task_id: str, events: list[Event], started: float) -> TaskOutcome:
    """A task stopped where it stood: its attempts, calls and time so far, for its row."""
    attempts = sum(e.get("event") == "attempt_started" and e.get("taskId") == task_id for e in events)
    return TaskOutcome(task_id, "interrupted", "", attempts=attempts, meter=session.run_meter,
                       duration_s=time.monotonic() - started)


def _rebased(events: list[Event], made: list[str], result: Integration) -> list[Event]:
    """The run's events with the task's commits named as the integration rebased them onto
    the base branch: the commits made in the worktree are on no branch of the remote."""
    if result.status != "integrated" or len(made) != len(result.commits):
        return events
    moved = dict(zip(made, result.commits, strict=True))
    return [{**e, "sha": moved[e["sha"]]} if e.get("sha") in moved else e for e in events]


def _end_state(status: str, loop_status: str, branch: str) -> str:
    """How the task ended on the base branch; where the integration changed the loop's
    end (closed here, blocked by a conflict there), both, so the console's earlier
    "closed" line is not the last word."""
    if loop_status and loop_status != status:
        return f"{loop_status} here, but {status} on {branch}"
    return status


def _kept_on(line: str, branch: str, base: str) -> str:
    """A story's commit line of a task whose commits conflicted: where they are kept."""
    if line.startswith("committed "):
        return f"{line} (kept on branch {branch} of the remote, not on {base})"
    return line


def _in_repository(packet: Path | None, tree: Path) -> Path | None:
    """An escalation packet's path in the repository (as integrated into the base branch),
    not in this worker's worktree, which is gone when the worker exits."""
    if packet is None:
        return None
    try:
        return packet.resolve().relative_to(tree.resolve())
    except ValueError:
        return packet
