"""A killed run put right by the next one, before it changes anything.

`ProjectSession.open` calls these in the order a reader follows them here:

1. `stop_leftover_processes`: what the dead run's checks or agent left running is killed
   (their sessions are in the journal), so nothing writes on while the tree is judged;
2. `finish_killed_commits`: a commit built but not yet on HEAD (code or bookkeeping) is
   finished, so the user's next `git commit` never reverts it; `finish_killed_landings`:
   a parallel task closed before its commits reached the branch is opened again;
3. `left_by_killed_run`: the paths the dead run's attempt changed, which the dirty-tree
   check must not take for the user's;
4. `recover`: each task left in progress has its unfinished subtask undone (only what the
   dead run did: `restore_task`) and goes back to open.

An interrupted run puts its own task back through `restore_task` too. Every undo first
keeps what it would lose in `recovered/<runId>/` (recovery/recovered.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from orchestrator.checks.convergence import StopReason
from orchestrator.git.repo import Repo
from orchestrator.layout import Layout, safe_name
from orchestrator.loop.plan import Subtask, SubtaskPlan
from orchestrator.recovery import landing
from orchestrator.recovery.journal import Journal, early_sessions_path, stop_leftovers
from orchestrator.recovery.recovered import Keeper, kept_event
from orchestrator.runlog import RunLog
from orchestrator.session.errors import EXIT_REFUSED, UserError
from orchestrator.tasks import Task, TaskBoard


@dataclass
class KilledRun:
    """What the run before this one left in `repo`, and how it is undone."""

    repo: Repo
    board: TaskBoard
    runlog: RunLog
    notices: list[str]  # what the user is told as the run opens

    @property
    def layout(self) -> Layout:
        return Layout(self.repo.root)

    def _in_progress(self) -> list[Task]:
        return self.board.with_status("in_progress")

    # -- 1. processes -------------------------------------------------------------------

    def stop_leftover_processes(self) -> None:
        """Kill whatever a killed run's checks or attempt left running (their sessions are
        in the journal)."""
        for task in self._in_progress():
            if stop_leftovers(self.repo.root, task.id):
                self.notices.append(f"stopped the processes a killed run of {task.id} left running")
            early_sessions_path(self.repo.root, task.id).unlink(missing_ok=True)  # stopped: nothing left to learn

    # -- 2. commits ---------------------------------------------------------------------

    def finish_killed_commits(self) -> None:
        """A run killed during a commit (code or bookkeeping) may have left it half done: the
        commit built, the index or HEAD not yet moved. Finished before the tree is judged
        dirty, so that the user's next `git commit` never reverts it."""
        marker = self.layout.bookkeeping_marker
        with contextlib.suppress(FileNotFoundError):
            pending = orjson.loads(marker.read_bytes())
            if self.repo.finish_commit(list(pending["paths"]), pending["old"], pending["new"]):
                self.notices.append("finished the bookkeeping commit of a run killed while making it")
            marker.unlink()
        for task in self._in_progress():
            journal = Journal.load(self.repo.root, task.id)
            if journal is not None:
                journal.finish_commit(self.repo)

    def finish_killed_landings(self) -> None:
        """A parallel task is closed in its worktree before its commits land on the base
        branch (recovery/landing.py). Commits that landed are recorded on the task; a task
        closed without them is not done, and is opened again."""
        tasks = {safe_name(t.id): t for t in self.board.tasks()}
        for path, name, commits in landing.left(self.repo.root):
            task = tasks.get(name)
            if task is not None and commits and self.repo.contains(commits[-1]):
                if task.commits != commits:
                    self.board.update(task.id, commits=commits)
            elif task is not None and task.status == "closed":
                self.board.update(task.id, status="open", closed_at=None, close_reason=None, commits=[])
                self.notices.append(f"{task.id} was closed by a run killed before its commits reached "
                                    f"{self.repo.branch() or 'HEAD'}: it is open again")
            path.unlink(missing_ok=True)

    # -- 3. the paths it changed ----------------------------------------------------------

    def left_by_killed_run(self) -> set[str]:
        """Paths the unfinished subtasks of tasks left in progress changed (see `recover`)."""
        head, paths = self.repo.head(), set()
        for task in self._in_progress():
            for subtask, journal in self._unfinished(task):
                commit = journal.commit if journal is not None else None
                if commit is not None and commit["new"] == head:  # committed (finished at open): nothing left
                    continue
                if subtask.base_commit == head:
                    ours, _, _ = killed_attempt(self.repo, subtask, journal)
                    paths |= ours
        return paths

    def _unfinished(self, task: Task) -> list[tuple[Subtask, Journal | None]]:
        plan = SubtaskPlan.load(self.layout.plan(task.id))
        journal = Journal.load(self.repo.root, task.id)
        return [(s, journal if journal and journal.subtask_id == s.id else None)
                for s in (plan.subtasks if plan else []) if s.status == "in_progress" and s.base_commit]

    # -- 4. the tasks it left in progress ---------------------------------------------------

    def recover(self) -> list[str]:
        """Put back what a killed or interrupted run left: trees restored, tasks reopened."""
        recovered = []
        for task in self._in_progress():
            self.restore_task(task)
            recovered.append(task.id)
        if recovered:
            self.notices.append(
                "recovered task(s) left in progress by an earlier run: " + ", ".join(recovered)
            )
        return recovered

    def restore_task(
        self, task: Task, repo: Repo | None = None, *, reason: str = "interrupted run",
        stop_reason: StopReason | None = None,
    ) -> None:
        """Undo what the unfinished subtask of `task` did (only that) and put the task back to open.

        `repo` is a parallel worker's worktree (default: the project's). `reason` and
        `stop_reason` say why, as the loop's own put-back says it (a budget stop).
        """
        repo = repo or self.repo
        path = self.layout.plan(task.id)
        plan = SubtaskPlan.load(path)
        journal = Journal.load(self.repo.root, task.id)
        stop_leftovers(self.repo.root, task.id)
        for subtask in plan.subtasks if plan else []:
            if subtask.status != "in_progress" or subtask.base_commit is None:
                continue
            mine = journal if journal is not None and journal.subtask_id == subtask.id else None
            self._undo_attempt(task, subtask, mine, repo)
            if stop_reason is not None and subtask.status == "pending":
                subtask.convergence = stop_reason
            plan.save(path)
        if journal is not None:
            journal.end()
        self.board.reopen(task.id)
        why = {"convergence": stop_reason} if stop_reason is not None else {}
        self.runlog.event("task_reopened", taskId=task.id, reason=reason, **why)

    def _undo_attempt(self, task: Task, subtask: Subtask, journal: Journal | None, repo: Repo) -> None:
        assert subtask.base_commit is not None
        if journal is not None and journal.commit is not None and journal.finish_commit(repo):
            sha = str(journal.commit["new"])
            subtask.status, subtask.commit = "done", sha  # killed during its commit: finished
            self.runlog.event("commit_recovered", taskId=task.id, subtaskId=subtask.id, sha=sha)
            return
        subtask.status = "pending"
        if repo.head() != subtask.base_commit:
            # Someone committed since: the killed agent, or the user after the crash. Whose
            # a commit is cannot be told for sure, and history is never rewritten on a guess.
            return
        _, theirs, unknown = killed_attempt(repo, subtask, journal)
        if unknown:
            raise UserError(
                f"cannot tell whether the killed run of {task.id} or you removed {', '.join(unknown)}; "
                "nothing was changed: restore or commit those paths yourself and run again", EXIT_REFUSED)
        keeper, kept = Keeper(repo, self.layout.recovered(self.runlog.run_id)), []
        restored = repo.restore(subtask.base_commit, set(subtask.dirty_before) | theirs,
                                lambda paths: kept.extend(keeper.keep(paths)))
        put_back = put_back_user_files(repo, journal, lambda paths: kept.extend(keeper.keep(paths))) \
            if journal else []
        if kept:  # timing never proves whose a change was: what the undo would have lost is kept
            self.runlog.event("files_kept", taskId=task.id, subtaskId=subtask.id,
                              **kept_event(keeper.folder, self.repo.root, kept))
        self.runlog.event("restored", taskId=task.id, subtaskId=subtask.id, paths=restored,
                          keptYours=sorted(theirs), userFilesPutBack=put_back)


def killed_attempt(repo: Repo, subtask: Subtask, journal: Journal | None) -> tuple[set[str], set[str], list[str]]:
    """(paths the killed run changed, paths changed since by the user, paths it cannot tell)."""
    assert subtask.base_commit is not None
    changed = repo.changed_files(subtask.base_commit, set(subtask.dirty_before))
    if journal is None:  # a run from before the journal: everything it changed was its own
        return set(changed), set(), []
    verdicts = {rel: journal.written_by_run(repo.root, rel) for rel in changed}
    ours = {rel for rel, v in verdicts.items() if v}
    return ours, {rel for rel, v in verdicts.items() if v is False}, sorted(r for r, v in verdicts.items() if v is None)


def put_back_user_files(repo: Repo, journal: Journal, before: Callable[[list[str]], object]) -> list[str]:
    """The user's uncommitted files as they were, where the killed run overwrote them
    (`before` is given them first: what is there now may be a newer edit of theirs)."""
    put_back = []
    for rel in journal.user_copies:
        copy, target = journal.user_copy(rel), repo.root / rel
        current = target.read_bytes() if target.is_file() else None
        if copy is not None and current != copy and journal.written_by_run(repo.root, rel):
            put_back.append(rel)
    if put_back:
        before(put_back)
    for rel in put_back:
        target = repo.root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(journal.user_copy(rel) or b"")
    return put_back
