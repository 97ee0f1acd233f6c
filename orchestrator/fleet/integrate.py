"""Bring a task's result into the repository's base branch on the remote: once, in order, or not at all.

A worker ran the task in its worktree without committing the bookkeeping
(`ProjectSession.run_task(..., bookkeeping=False)`): the task's code commits are on the
worktree's HEAD, its `.openagents/` changes are in the tree. Under the repository's
fleet-wide lock (`orchestrator.fleet.locks`), `integrate`:

1. puts the bookkeeping aside (read into memory, the tree back to HEAD);
2. fetches, and reads the task's status at the remote tip: a task another worker has
   closed or blocked meanwhile (a worker thought dead that finished after all) keeps the
   tip's result and ours is dropped, so a task is integrated exactly once;
3. rebases the code commits onto the tip (a task's one commit is made again there by git's
   merge of trees, `GitPlumbing.replay`; never the bookkeeping, which git's line merge
   would garble), writes the bookkeeping merged three-way (`orchestrator.fleet.bookkeeping`),
   records the rebased shas on the task and commits the bookkeeping;
4. pushes to the base branch. A push refused because the branch moved (someone outside
   the fleet pushed) starts again from 2, a few times.

A rebase that conflicts keeps the task's commits on `goldenloop/<taskId>` on the remote,
for a human, and the task is blocked at the tip with a reason naming that branch, as
parallel worktrees do locally. So does a task whose checks, run again on its commits on
top of a tip that moved since it started, fail there (`orchestrator.checks.combined`).
A blocked (escalated) task's bookkeeping is integrated
the same way: its escalation packet is for a human.

The lock spares the fleet rebases that would be refused;
the push is the real guard: git refuses a push that is not a fast-forward, so even two
integrations at once could not lose a commit.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import anyio
import orjson

from orchestrator.batch.worktree import BRANCH_PREFIX
from orchestrator.fleet.bookkeeping import TASKS, merge_file
from orchestrator.fleet.mirror import NETWORK_TIMEOUT_S, GitFailed, Mirrors, RepoRef, blob, failure, git, run_git
from orchestrator.git.repo import ReplayConflict
from orchestrator.judging.combined import combined_failure, combined_reason
from orchestrator.layout import PREFIX, safe_name
from orchestrator.loop.outcome import TaskOutcome
from orchestrator.session import ProjectSession

PUSH_TRIES = 5
OPEN = ("open", "in_progress")
RUNTIME = (".lock",)  # never bookkeeping, even where a project's .gitignore forgot them
MEMORY_CACHES = (f"{PREFIX}memory/reflections.jsonl",
                 f"{PREFIX}memory/.pruned")  # caches, git-ignored; an old project may still track them


class IntegrationFailed(Exception):
    """The remote could not be updated (unreachable, or its branch kept moving); one sentence."""


@dataclass
class Integration:
    status: Literal["integrated", "conflict", "dropped"]
    reason: str = ""
    commits: list[str] = field(default_factory=list)  # the task's commits as they are on the base branch
    branch: str = ""  # a conflict: the branch of the remote its commits are kept on


# -- the integration ------------------------------------------------------------------------


@dataclass
class Work:
    """What a task left in its worktree, put aside before the tree is rebased."""

    start: str  # the tip the task started from
    head: str  # its code commits' last, or `start` when it made none
    bookkeeping: dict[str, tuple[bytes | None, bytes | None]]  # path -> (at start, ours)


def integrate(session: ProjectSession, ref: RepoRef, mirrors: Mirrors, outcome: TaskOutcome, start: str) -> Integration:
    """Integrate `outcome`'s task from `session`'s worktree (see the module's docstring)."""
    tree = session.project_dir
    work = put_aside(tree, start)
    for _ in range(PUSH_TRIES):
        tip = mirrors.fetch_tip(ref)
        status = status_at(mirrors, ref, tip, outcome.task_id)
        if status not in OPEN:
            git(tree, "reset", "--quiet", "--hard", tip)
            return Integration("dropped", f"{outcome.task_id} is already {status} on {ref.branch}, "
                                          "integrated by another worker; this run's result was dropped")
        result = _onto(session, ref, mirrors, outcome, work, tip)
        if _push(mirrors, ref, tree):
            return result
    raise IntegrationFailed(f"{ref.branch} of {ref.url} kept moving: {PUSH_TRIES} pushes were refused")


def put_aside(tree: Path, start: str) -> Work:
    """Read the task's bookkeeping changes into memory and put the tree back to HEAD."""
    saved = {p: (blob(tree, start, p), _read(tree / p)) for p in _bookkeeping_paths(tree)}
    git(tree, "reset", "--quiet", "--hard")
    for path, (_, ours) in saved.items():
        if ours is not None:
            (tree / path).unlink(missing_ok=True)  # untracked ones: a rebase must not trip on them
    return Work(start, git(tree, "rev-parse", "HEAD").strip(), saved)


def _bookkeeping_paths(tree: Path) -> list[str]:
    listed = git(tree, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", "--", PREFIX)
    paths = [entry[3:] for entry in listed.split("\0") if entry]
    return [p for p in paths if not p.endswith(RUNTIME) and not p.startswith(MEMORY_CACHES)]


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def status_at(mirrors: Mirrors, ref: RepoRef, commit: str, task_id: str) -> str:
    """The task's status in tasks.jsonl at `commit` ("gone" when it is not there)."""
    for line in (mirrors.read(ref, commit, TASKS) or b"").splitlines():
        try:
            body = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(body, dict) and body.get("id") == task_id:
            return str(body.get("status", "open"))
    return "gone"


def _onto(session: ProjectSession, ref: RepoRef, mirrors: Mirrors, outcome: TaskOutcome, work: Work,
          tip: str) -> Integration:
    """The task's commits and bookkeeping on top of `tip`, committed in the worktree."""
    tree = session.project_dir
    if work.head != work.start:
        try:
            replayed = session.repo.replay(work.head, tip)  # a task's one commit: no rebase's checkouts
        except ReplayConflict as exc:
            return _conflict(session, ref, mirrors, outcome, work, tip, _merge_conflict(ref, str(exc)))
        git(tree, "reset", "--quiet", "--hard", replayed or work.head)
        if replayed is None:
            try:
                git(tree, "rebase", "--quiet", "--onto", tip, work.start)
            except GitFailed as exc:
                git(tree, "rebase", "--abort", check=False)
                return _conflict(session, ref, mirrors, outcome, work, tip, _merge_conflict(ref, str(exc)))
        if tip != work.start:  # others landed meanwhile: checked together before anything lands
            on_top = git(tree, "rev-parse", "HEAD").strip()
            failed = anyio.from_thread.run(functools.partial(
                combined_failure, session.repo, session.wiring.judges, session.config, on_top,
                project_dir=tree, task_id=outcome.task_id, allowed=outcome.others))
            if failed is not None:
                return _conflict(session, ref, mirrors, outcome, work, tip,
                                 lambda branch: combined_reason(failed, ref.branch, f"{branch} of the remote",
                                                                outcome.others))
    else:
        git(tree, "reset", "--quiet", "--hard", tip)
    rebased = git(tree, "rev-list", "--reverse", f"{tip}..HEAD").split()
    _write_merged(tree, work, mirrors, ref, tip)
    if rebased:
        task = session.board.get(outcome.task_id)
        made = set(git(tree, "rev-list", f"{work.start}..{work.head}").split())
        old = [c for c in task.commits if c not in made]
        session.board.update(outcome.task_id, commits=[*old, *rebased])
    session.commit_bookkeeping(outcome.task_id)
    return Integration("integrated", commits=rebased)


def _merge_conflict(ref: RepoRef, detail: str) -> Callable[[str], str]:
    detail = detail.removeprefix("git rebase failed: ")
    return lambda branch: (f"merge conflict: its commits conflict with {ref.branch}; they are kept on branch "
                           f"{branch} of the remote for a human to merge ({detail})")


def _conflict(session: ProjectSession, ref: RepoRef, mirrors: Mirrors, outcome: TaskOutcome, work: Work,
              tip: str, why: Callable[[str], str]) -> Integration:
    """Keep the commits on goldenloop/<taskId> on the remote; block the task at the tip,
    `why(branch)` saying why."""
    tree = session.project_dir
    branch = BRANCH_PREFIX + safe_name(outcome.task_id)
    with mirrors.locked(ref):
        git(tree, "push", "--quiet", "--force", "origin", f"{work.head}:refs/heads/{branch}",
            timeout=NETWORK_TIMEOUT_S)
    reason = why(branch)
    git(tree, "reset", "--quiet", "--hard", tip)
    _write_merged(tree, work, mirrors, ref, tip)
    session.board.update(outcome.task_id, status="blocked", close_reason=reason, closed_at=None)
    session.commit_bookkeeping(outcome.task_id)
    return Integration("conflict", reason, branch=branch)


def _write_merged(tree: Path, work: Work, mirrors: Mirrors, ref: RepoRef, tip: str) -> None:
    for path, (base, ours) in work.bookkeeping.items():
        merged = merge_file(path, base, ours, mirrors.read(ref, tip, path))
        target = tree / path
        if merged is None:
            target.unlink(missing_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(merged)


def _push(mirrors: Mirrors, ref: RepoRef, tree: Path) -> bool:
    """Push HEAD to the base branch; False when refused because the branch moved on."""
    with mirrors.locked(ref):  # the push updates the mirror's refs, which the other workers share
        done = run_git(tree, "push", "--porcelain", "origin", f"HEAD:refs/heads/{ref.branch}",
                       timeout=NETWORK_TIMEOUT_S)
    if done.returncode == 0:
        return True
    if "[rejected]" in done.stdout:  # not a fast-forward: the branch moved since the fetch
        return False
    raise IntegrationFailed(f"cannot push to {ref.url}: {failure('push', done)}")
