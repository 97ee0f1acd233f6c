"""A killed run put right by the next one, before it changes anything.

`ProjectSession.open` calls these in the order a reader follows them here:

1. `stop_leftover_processes`: what the dead run's checks or agent left running is killed
   (their sessions are in the journal), so nothing writes on while the tree is judged;
2. `finish_killed_commits`: a commit built but not yet on HEAD (code or bookkeeping) is
   finished, so the user's next `git commit` never reverts it; `finish_killed_landings`:
   a parallel task closed before its commits reached the branch is opened again;
3. `recover`: each task left in progress goes back to open, its unfinished subtask to
   pending (`restore_task`). Its attempts ran in a worktree of their own: the user's
   checkout holds nothing of theirs to undo, and the worktree is removed as the run opens
   (`RepoRun.clean_stale_worktrees`).

An interrupted run puts its own task back through `restore_task` too.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import orjson

from orchestrator.batch.worktree import BRANCH_PREFIX, Worktrees
from orchestrator.checks.convergence import StopReason
from orchestrator.git.repo import Repo, RepoError
from orchestrator.layout import Layout, safe_name
from orchestrator.loop.plan import SubtaskPlan
from orchestrator.recovery import landing
from orchestrator.recovery.journal import Journal, early_sessions_path, stop_leftovers
from orchestrator.runlog import RunLog
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

    def remove_dead_worktrees(self) -> None:
        """The worktrees a dead run's tasks ran in, and their branches, except the one a
        blocked task keeps for the user. The run holds the lock: no live run has one."""
        kept = {f"goldenloop/{safe_name(t.id)}" for t in self.board.with_status("blocked")}
        removed = Worktrees(self.repo.root).clean_stale(kept)
        if removed:
            self.notices.append(f"removed {len(removed)} worktree(s) left by a crashed run")

    def close_landed_by_hand(self) -> None:
        """A task blocked because a file of the user's was in the way keeps its commits on
        `goldenloop/<taskId>`; once the user has brought them onto their branch (picked or
        merged, as the block's sentence says), the task is closed with the commits as they
        are there and its branch deleted. Nothing else of theirs is changed."""
        for task in self.board.with_status("blocked"):
            branch = BRANCH_PREFIX + safe_name(task.id)
            commits = self._on_head(task, branch)
            if not commits:
                continue
            self.board.update(task.id, commits=[])  # those it named were the branch's, never landed
            self.board.close(task.id, f"its commits, kept on {branch}, are on your branch", commits)
            self.repo.git("branch", "-D", branch)
            self.runlog.event("task_closed", taskId=task.id, commits=commits, reason="landed by hand")
            self.notices.append(f"closed {task.id}: its commits, kept on {branch}, are on your branch now")

    def _on_head(self, task: Task, branch: str) -> list[str]:
        """HEAD's commits that hold `branch`'s work, oldest first: its own when merged, their
        copies when picked; [] unless every commit of it is there."""
        try:
            theirs = self._marked("--left-only", branch)
        except RepoError:  # no such branch
            return []
        if theirs:  # picked, or not (yet) there
            if any(mark != "=" for mark, _ in theirs):
                return []
            return [sha for mark, sha in reversed(self._marked("--right-only", branch)) if mark == "="]
        plan = SubtaskPlan.load(self.layout.plan(task.id))  # merged: the branch is part of HEAD
        base = plan.subtasks[0].base_commit if plan and plan.subtasks else None
        return self.repo.git("rev-list", "--reverse", *([f"{base}..{branch}"] if base else ["-1", branch])).split()

    def _marked(self, side: str, branch: str) -> list[tuple[str, str]]:
        listed = self.repo.git("log", "--cherry-mark", side, "--format=%m %H", f"{branch}...HEAD")
        return [(line[0], line[2:]) for line in listed.splitlines() if line.strip()]

    # -- 2. commits ---------------------------------------------------------------------

    def finish_killed_commits(self) -> None:
        """A run killed during a bookkeeping commit may have left it half done: the commit
        built, the index or HEAD not yet moved. Finished before the tree is judged dirty, so
        that the user's next `git commit` never reverts it. (A code commit is made in a
        worktree: it reaches the checkout only by landing, `finish_killed_landings`.)"""
        marker = self.layout.bookkeeping_marker
        with contextlib.suppress(FileNotFoundError):
            pending = orjson.loads(marker.read_bytes())
            if self.repo.finish_commit(list(pending["paths"]), pending["old"], pending["new"]):
                self.notices.append("finished the bookkeeping commit of a run killed while making it")
            marker.unlink()

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

    # -- 3. the tasks it left in progress ---------------------------------------------------

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

    def restore_task(self, task: Task, *, reason: str = "interrupted run", stop_reason: StopReason | None = None
                     ) -> None:
        """Put `task` back to open and its unfinished subtask to pending. Its attempts ran in
        a worktree, which the next task resets or the run removes: nothing in the user's
        checkout is undone, and nothing of theirs is copied anywhere; a commit it was making
        in the worktree is made again by its next run. `reason` and `stop_reason` say why, as
        the loop's own put-back says it (a budget stop)."""
        path = self.layout.plan(task.id)
        plan = SubtaskPlan.load(path)
        journal = Journal.load(self.repo.root, task.id)
        stop_leftovers(self.repo.root, task.id)
        for subtask in plan.subtasks if plan else []:
            if subtask.status != "in_progress" or subtask.base_commit is None:
                continue
            subtask.status = "pending"
            if stop_reason is not None:
                subtask.convergence = stop_reason
            plan.save(path)
        if journal is not None:
            journal.end()
        self.board.reopen(task.id)
        why = {"convergence": stop_reason} if stop_reason is not None else {}
        self.runlog.event("task_reopened", taskId=task.id, reason=reason, **why)
