"""Where a worker keeps the repositories it works on: a bare mirror per URL, a worktree per worker.

Under the worker's `--workdir` (shared by the worker processes of one machine):

    mirrors/<key>.git        a bare clone of the repository, fetched under <key>.lock
    workers/<name>-<pid>/    one worker process: alive.lock (held while it lives) and
      <key>/                 its worktree of the repository, reused job after job

The mirror is fetched under a file lock because every worker of the machine uses it;
its branches are tracked as `refs/remotes/origin/*`, so a fetch never touches the
worktrees' own state. A worktree is reset to the remote tip before each job (`reset
--hard`, `clean`), which is what a fresh clone would be: a task always starts from what
the remote holds, never from what a dead worker left. Its `.openagents/memory/` survives
the reset, so that a project's own memory (`--memory project`) grows across jobs.

A worker that died (SIGKILL, power cut) leaves its folder behind with `alive.lock` free:
the next worker of the machine to look (at start, and then while it waits) stops the
processes the dead worker's attempt left running (their sessions are in the journal, as
`ProjectSession.open` finds them) and removes the folder.

Git never asks for a password here (it would hang a worker): credentials come from the
machine (an SSH key, a credential helper), never from the URL, which the queue stores.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from orchestrator.layout import safe_name
from orchestrator.loop.project_memory import normal_remote
from orchestrator.recovery.journal import stop_leftovers
from reflection.fileio import file_lock
from reflection.redact import redact

log = logging.getLogger("goldenloop.fleet.mirror")

NETWORK_TIMEOUT_S = 600.0  # a clone, fetch or push that takes longer has hung
LOCAL_TIMEOUT_S = 120.0
KEPT_ACROSS_JOBS = ".openagents/memory/"


class GitFailed(Exception):
    """A git command failed; `str()` is one sentence (its last line of error output)."""


def git(cwd: Path, *args: str, timeout: float = LOCAL_TIMEOUT_S, check: bool = True) -> str:
    """Run git in `cwd`; its output. GitFailed (one sentence) when it fails and `check`."""
    done = run_git(cwd, *args, timeout=timeout)
    if check and done.returncode != 0:
        raise GitFailed(failure(args[0], done))
    return done.stdout


def run_git(cwd: Path, *args: str, timeout: float = LOCAL_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    """Run git in `cwd`, never prompting; GitFailed only when it hangs past `timeout`."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true"}
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise GitFailed(f"git {args[0]} did not finish within {timeout:.0f} s") from None


def blob(cwd: Path, commit: str, path: str) -> bytes | None:
    """A file's bytes at `commit` of the repository at `cwd` (a worktree reads its mirror's
    objects); None when it is not there."""
    try:
        done = subprocess.run(["git", "cat-file", "blob", f"{commit}:{path}"], cwd=cwd, capture_output=True,
                              timeout=LOCAL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise GitFailed(f"git cat-file did not finish within {LOCAL_TIMEOUT_S:.0f} s") from None
    return done.stdout if done.returncode == 0 else None


def failure(command: str, done: subprocess.CompletedProcess[str]) -> str:
    """A failed git command as one sentence: its first error line (else its last line)."""
    lines = [line for line in (done.stderr or done.stdout).strip().splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("fatal:", "error:"))]
    detail = (errors or lines or [f"exit {done.returncode}"])[0].strip()
    return redact(f"git {command} failed: {detail}")


@dataclass(frozen=True)
class RepoRef:
    """A repository of the fleet: its URL and the branch tasks are integrated into."""

    url: str
    branch: str = ""

    @property
    def name(self) -> str:
        """Its last path segment, for people: `calc` for `git@host:team/calc.git`."""
        path = urlsplit(self.url).path if "://" in self.url else self.url.rpartition(":")[2]
        last = path.rstrip("/").rpartition("/")[2].removesuffix(".git")
        return last or "repo"

    @property
    def address(self) -> str:
        """The repository whatever the URL's spelling (`git@host:a/b.git` = `ssh://git@host/a/b`),
        as the shared memory names it: one repository is one mirror, one lock, one task's job."""
        return normal_remote(self.url)

    @property
    def key(self) -> str:
        """Unique per repository and safe as a file name: its name and a hash of its address."""
        return f"{safe_name(self.name)}-{hashlib.sha256(self.address.encode()).hexdigest()[:10]}"


def name_of_key(key: str) -> str:
    """The repository's name in its key (`api-3fa2c1d4e5` is `api`), as reports show it."""
    return key.rsplit("-", 1)[0]


class Mirrors:
    """The bare mirrors of one machine's workdir."""

    def __init__(self, workdir: Path) -> None:
        self.root = workdir / "mirrors"

    def path(self, ref: RepoRef) -> Path:
        return self.root / f"{ref.key}.git"

    @contextlib.contextmanager
    def locked(self, ref: RepoRef) -> Iterator[Path]:
        """The mirror, held by this process alone (fetches, pushes, worktrees added or removed)."""
        path = self.path(ref)
        with file_lock(path.with_name(path.name.removesuffix(".git") + ".lock"), timeout_s=NETWORK_TIMEOUT_S):
            yield path

    def fetch(self, ref: RepoRef) -> Path:
        """Clone the repository if this machine has not yet, else fetch it; the mirror."""
        with self.locked(ref) as path:
            if not (path / "HEAD").exists():
                self._clone(ref, path)
            git(path, "fetch", "--quiet", "--prune", "origin", timeout=NETWORK_TIMEOUT_S)
        return path

    def _clone(self, ref: RepoRef, path: Path) -> None:
        # Cloned beside and renamed: a clone killed half-way leaves no mirror to trust.
        partial = path.with_name(path.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        self.root.mkdir(parents=True, exist_ok=True)
        git(self.root, "clone", "--bare", "--quiet", ref.url, str(partial), timeout=NETWORK_TIMEOUT_S)
        git(partial, "config", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*")
        git(partial, "config", "gc.autoDetach", "false")  # no git process outlives the worker's
        if not git(partial, "config", "user.email", check=False).strip():  # rebases need a committer
            git(partial, "config", "user.name", "goldenloop fleet")
            git(partial, "config", "user.email", "goldenloop@localhost")
        partial.rename(path)

    def default_branch(self, ref: RepoRef) -> str:
        """The remote's default branch, as it was when this machine cloned it."""
        return git(self.path(ref), "symbolic-ref", "--short", "HEAD").strip()

    def tip(self, ref: RepoRef) -> str:
        """The remote branch's commit as last fetched; GitFailed naming it when there is none."""
        done = git(self.path(ref), "rev-parse", "--verify", "--quiet", f"refs/remotes/origin/{ref.branch}^{{commit}}",
                   check=False).strip()
        if not done:
            raise GitFailed(f"{ref.url} has no branch {ref.branch}")
        return done

    def files(self, ref: RepoRef, commit: str, folder: str) -> list[str]:
        """The paths of the files under `folder` at `commit`."""
        return git(self.path(ref), "ls-tree", "-r", "--name-only", commit, "--", folder).split()

    def read(self, ref: RepoRef, commit: str, path: str) -> bytes | None:
        """A file's bytes at `commit`; None when it is not there."""
        return blob(self.path(ref), commit, path)

    def fetch_tip(self, ref: RepoRef) -> str:
        """The remote branch's commit, fetched now."""
        self.fetch(ref)
        return self.tip(ref)


class WorkerTrees:
    """One worker process's worktrees (one per repository), and its sign of life."""

    def __init__(self, workdir: Path, mirrors: Mirrors, name: str) -> None:
        self.workdir = workdir
        self.mirrors = mirrors
        self.home = workdir / "workers" / f"{safe_name(name)}-{os.getpid()}"
        self._alive: int | None = None

    def open(self) -> list[str]:
        """Take this worker's folder (after sweeping dead workers'); what was swept."""
        self.home.parent.mkdir(parents=True, exist_ok=True)
        swept = sweep_dead(self.workdir, self.mirrors)  # a folder of this name is a dead one's
        # Locked before it gets its name: a sweeper never sees it with its lock free.
        starting = self.home.with_name("." + self.home.name)
        shutil.rmtree(starting, ignore_errors=True)
        starting.mkdir()
        fd = os.open(starting / "alive.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel however this process ends
        starting.rename(self.home)
        self._alive = fd
        return swept

    def prepare(self, ref: RepoRef, tip: str) -> Path:
        """This worker's worktree of `ref`, exactly the remote tip `tip` (added on first use)."""
        tree = self.home / ref.key
        if (tree / ".git").exists():
            git(tree, "rebase", "--quit", check=False)  # an integration cut short must not haunt the next job
            git(tree, "reset", "--quiet", "--hard", tip)
            git(tree, "clean", "-ffdxq", "-e", KEPT_ACROSS_JOBS)
            return tree
        with self.mirrors.locked(ref) as mirror:
            shutil.rmtree(tree, ignore_errors=True)  # a folder without .git is a half-made worktree
            git(mirror, "worktree", "prune")
            git(mirror, "worktree", "add", "--quiet", "--detach", "--force", str(tree), tip)
        return tree

    def close(self) -> None:
        """Remove this worker's worktrees and folder; a clean exit leaves nothing behind."""
        if self._alive is None:
            return
        trees = [p for p in self.home.iterdir() if p.is_dir()] if self.home.is_dir() else []
        shutil.rmtree(self.home, ignore_errors=True)
        _prune_mirrors(self.mirrors, trees)
        os.close(self._alive)
        self._alive = None


def sweep_dead(workdir: Path, mirrors: Mirrors, keep: Path | None = None) -> list[str]:
    """Stop what dead workers of this machine left running and remove their folders."""
    swept: list[str] = []
    folders = workdir / "workers"
    for home in sorted(folders.iterdir()) if folders.is_dir() else []:
        if home == keep or not home.is_dir() or home.name.startswith("."):
            continue
        with _if_dead(home) as dead:
            if not dead:
                continue
            trees = [p for p in home.iterdir() if p.is_dir()]
            for tree in trees:
                if stop_leftovers(tree):  # its journal's sessions, and whatever carries a task's mark
                    log.info("stopped the processes a dead worker left running in %s", tree)
            shutil.rmtree(home, ignore_errors=True)
            _prune_mirrors(mirrors, trees)
            swept.append(home.name)
    return swept


@contextlib.contextmanager
def _if_dead(home: Path) -> Iterator[bool]:
    """True (holding its lock meanwhile) when no live process holds `home`'s alive.lock."""
    try:
        fd = os.open(home / "alive.lock", os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:  # a worker starting right now has not made it yet, or a leftover
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _prune_mirrors(mirrors: Mirrors, trees: list[Path]) -> None:
    """Forget the removed worktrees in their mirrors (named by the tree's folder, the key)."""
    for tree in trees:
        mirror = mirrors.root / f"{tree.name}.git"
        if mirror.is_dir():
            with file_lock(mirror.with_name(tree.name + ".lock"), timeout_s=NETWORK_TIMEOUT_S):
                git(mirror, "worktree", "prune", check=False)
