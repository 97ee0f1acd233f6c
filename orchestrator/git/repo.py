"""The repository as the loop sees it: what an attempt changed, its diff, commit, restore.

An attempt is measured against a base commit and the set of paths that were dirty
(modified or untracked) when the subtask started: anything else that differs from the
base, or is untracked and new, is the attempt's. The user's own dirty paths and
`.openagents/` are never counted, restored or committed.

Diffs and commits are built in a scratch index (GIT_INDEX_FILE) seeded from a commit,
so whatever the user has staged stays exactly as it is. Git's cost grows with the
repository, so the usual case takes the cheap road: one `status` says what an attempt
changed, and the scratch index is a copy of the user's index when that holds nothing
staged (reading a 20k-file tree into an index costs ten copies).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from orchestrator.tempfiles import private_temp, sweep_dead, temp_prefix

logger = logging.getLogger("goldenloop.repo")

OPENAGENTS = ".openagents/"
FALLBACK_NAME = "goldenloop"
FALLBACK_EMAIL = "goldenloop@localhost"
IDENTITY_KEYS = r"^(user|author|committer)\.(name|email)$"
TRUNCATION_MARKER = "\n[... diff truncated: {shown} of {total} bytes shown ...]\n"

# Paths are file names, never globs; no optional locks so we don't fight the user's git.
# No hook and no fsmonitor runs: an attempt that set one in .git/config would otherwise
# run its own code inside goldenloop's look at what it changed. No replacement object
# (`git replace`) stands in for the one a commit names: what is judged and committed is
# what the objects' ids say.
# Given as options rather than variables: a command with no environment of its own
# inherits ours as it is, with no copy of it built and encoded per process.
NO_HOOKS = ("--no-replace-objects", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null")
_GIT = ("git", *NO_HOOKS, "--literal-pathspecs", "--no-optional-locks")
# The identity of the user's index file that a scratch index copies (`_index_identity`).
Seed = tuple[object, ...] | None
# A patch must be machine-applicable whatever the user's diff configuration says.
_DIFF_FLAGS = (
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-renames",
    "--no-relative",
    "--src-prefix=a/",
    "--dst-prefix=b/",
)


class ReplayConflict(Exception):
    """A commit's change conflicts with the commit it was to be made again on; says where."""


class RepoError(Exception):
    """The repository cannot be used as asked; the message is one sentence for a user."""


class HistoryRewritten(RepoError):
    """An attempt moved HEAD to history that does not build on its base; says how."""


def _under(path: str, prefix: str) -> bool:
    return path == prefix.rstrip("/") or path.startswith(prefix)


def _outside_openagents(paths: set[str]) -> set[str]:
    return {p for p in paths if not _under(p, OPENAGENTS)}


def _present(root: Path, path: str) -> bool:
    """A file of the working tree: there, and not behind a link (a folder of the tree replaced
    by a symlink: the file is gone from the tree, whatever the link points at)."""
    return os.path.lexists(root / path) and not any((root / p).is_symlink() for p in Path(path).parents[:-1])


def _split_z(output: str) -> list[str]:
    return [item for item in output.split("\0") if item]


def _lines_of(items: list[str]) -> bytes:
    return b"".join(os.fsencode(item) + b"\n" for item in items)


def _plain_commit(body: bytes | None) -> tuple[str, dict[str, str], bytes] | None:
    """(its one parent, its author as GIT_AUTHOR_* variables, its message) of a commit with
    nothing but a tree, one parent, an author and a committer; None for anything else (a
    merge, a signature, an encoding of its own), which a rebase keeps right."""
    if body is None:
        return None
    head, _, message = body.partition(b"\n\n")
    fields = [line.partition(b" ") for line in head.split(b"\n")]
    names = [name for name, _, _ in fields]
    if sorted(names) != [b"author", b"committer", b"parent", b"tree"]:
        return None
    values = {name.decode(): value for name, _, value in fields}
    author = re.fullmatch(rb"(.*) <(.*)> (\d+ [+-]\d{4})", values["author"])
    if author is None:
        return None
    try:
        name, email, date = (part.decode() for part in author.groups())
        parent = values["parent"].decode()
    except UnicodeDecodeError:
        return None
    return parent, {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date}, message


def _truncate(text: str, max_bytes: int | None) -> str:
    if max_bytes is None:
        return text
    data = os.fsencode(text)
    if len(data) <= max_bytes:
        return text
    shown = os.fsdecode(data[:max_bytes]).encode("utf-8", "ignore").decode("utf-8")
    return shown + TRUNCATION_MARKER.format(shown=max_bytes, total=len(data))


def _run(args: list[str], *, cwd: Path, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """One git command; paths that are not UTF-8 survive as surrogate escapes (os.fsdecode)."""
    try:
        return subprocess.run(
            [*_GIT, *args], cwd=cwd, env={**os.environ, **env} if env else None,
            capture_output=True, text=True, encoding="utf-8", errors="surrogateescape",
            stdin=subprocess.DEVNULL, check=False,
        )
    except FileNotFoundError:
        raise RepoError("git is not installed (or not on PATH); goldenloop needs it") from None


class GitPlumbing:
    """A git working tree opened at `path` (its top level or any folder inside it), and
    the plumbing every operation of `Repo` stands on: git run as a process, refs read from
    their files, commits' names and trees cached, a scratch index for private work."""

    def __init__(self, path: Path) -> None:
        path = Path(path)
        if not path.is_dir():
            raise RepoError(f"{path} is not a git repository")
        found = _run(["rev-parse", "--is-bare-repository", "--absolute-git-dir", "--git-common-dir",
                      "--show-toplevel"], cwd=path)
        if found.returncode != 0:
            raise RepoError(f"{path} is not a git repository")
        lines = found.stdout.splitlines()
        if lines[0] == "true" or len(lines) < 4:
            raise RepoError(f"{path} is a bare git repository; goldenloop needs a working tree")
        self.git_dir = Path(lines[1])
        self.common_dir = (path / lines[2]).resolve()  # git prints it relative to where it ran
        self.root = Path(lines[3])
        self._commits: dict[str, str] = {}
        self._trees: dict[str, str] = {}  # commit -> tree: neither ever changes
        self._identity: dict[str, str] | None = None
        # (the index file's identity, HEAD) when the last full `status` saw nothing staged
        self._nothing_staged: tuple[tuple[object, ...] | None, str] | None = None
        if not self._has_commits():
            raise RepoError(
                f"{self.root} has no commits yet; make a first commit "
                "(for example `git commit --allow-empty -m init`) and run again"
            )

    def close(self) -> None:
        """Nothing to stop: every git command is a process of its own."""

    # -- plumbing -------------------------------------------------------------------

    def _git(
        self, *args: str, env: Mapping[str, str] | None = None, strip: bool = True
    ) -> str:
        done = _run(list(args), cwd=self.root, env=env)
        if done.returncode != 0:
            detail = (done.stderr.strip().splitlines() or [""])[-1]
            raise RepoError(f"git {args[0]} failed: {detail}")
        return done.stdout.removesuffix("\n") if strip else done.stdout

    def _objects(self, *args: str, data: bytes = b"", env: Mapping[str, str] | None = None) -> bytes:
        """A git command fed `data` on its standard input; its output as bytes (object work)."""
        try:
            done = subprocess.run([*_GIT, *args], cwd=self.root, input=data, env={**os.environ, **env} if env else None,
                                  capture_output=True, check=False)
        except FileNotFoundError:
            raise RepoError("git is not installed (or not on PATH); goldenloop needs it") from None
        if done.returncode != 0:
            detail = (os.fsdecode(done.stderr).strip().splitlines() or [""])[-1]
            raise RepoError(f"git {args[0]} failed: {detail}")
        return done.stdout

    def git(self, *args: str, env: Mapping[str, str] | None = None) -> str:
        """A git command of this repository (no hook, no fsmonitor); its output; RepoError
        with git's last line when it fails."""
        return self._git(*args, env=env)

    def feed(self, *args: str, data: bytes, env: Mapping[str, str] | None = None) -> bytes:
        """A git command fed `data` on its standard input; its output as bytes."""
        return self._objects(*args, data=data, env=env)

    def tree_of(self, commit: str) -> str:
        """A commit's tree (cached: neither ever changes)."""
        return self._tree_of(self._commit_sha(commit))

    def _commit_sha(self, rev: str) -> str:
        if rev in self._commits:  # commits never change: check each name once
            return self._commits[rev]
        try:
            sha = self._git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        except RepoError:
            raise RepoError(f"{rev!r} is not a commit in {self.root}") from None
        if rev == sha:
            self._commits[rev] = sha
        return sha

    def _paths_in_tree(self, rev: str, paths: Iterable[str]) -> set[str]:
        listed = self._git("ls-tree", "-r", "-z", "--name-only", rev, "--", *paths)
        return set(_split_z(listed))

    @contextmanager
    def _scratch_index(self, rev: str, replaced: Iterable[str] | None = ()) -> Iterator[dict[str, str]]:
        """An environment whose index is a private copy of `rev`'s tree, except for the
        `replaced` paths, whose entries the caller is about to overwrite anyway.
        `replaced=None`: any copy of the user's index will do (a diff against `rev` reads
        an index only for which paths it has, and the caller adds those it lacks)."""
        with self._seeded_index(rev, replaced) as (env, _):
            yield env

    @contextmanager
    def _seeded_index(self, rev: str, replaced: Iterable[str] | None) -> Iterator[tuple[dict[str, str], Seed]]:
        """`_scratch_index`, and the identity of the user's index file it copies when it is
        that file plus whatever the caller stages (None: it was read from `rev`'s tree)."""
        with tempfile.TemporaryDirectory(prefix=temp_prefix("index"), dir=private_temp()) as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            usable, seed = self._copy_user_index(rev, None if replaced is None else set(replaced), env)
            if not usable:
                self._git("read-tree", rev, env=env)
            yield env, seed

    def _copy_user_index(self, rev: str, replaced: set[str] | None, env: Mapping[str, str]) -> tuple[bool, Seed]:
        """Seed the scratch index from the user's when it stages nothing but `replaced`
        against `rev` (its stat data also spares git re-reading unchanged files): whether
        the copy will do, and the identity of the file copied when known."""
        copied = self._index_identity()
        try:  # with its mtime: git trusts an entry's stat data only when older than the index
            shutil.copy2(self.git_dir / "index", env["GIT_INDEX_FILE"])
        except OSError:  # no index yet, or unreadable: read the tree instead
            return False, None
        seed = copied if copied is not None and self._index_identity() == copied else None
        if replaced is None:
            return True, None
        if seed is not None and self._nothing_staged == (seed, rev):
            return True, seed  # the very index file a `status` against `rev` found nothing staged in
        staged = self._git("diff-index", "--cached", "--name-only", "-z", "--no-renames", rev, env=env)
        return (True, seed) if set(_split_z(staged)) <= replaced else (False, None)

    def _install_index(self, env: Mapping[str, str], seed: Seed) -> tuple[object, ...] | None:
        """The scratch index becomes the user's when the user's is still the file it
        copies: the same entries an `update-index` of the committed paths would give, one
        process fewer. Written beside it first, then renamed over it while `index.lock` is
        held, as git excludes other writers: a kill leaves a lock behind only in the moment
        of the rename. Returns the new file's identity; None when nothing was done (the
        caller stages the usual way)."""
        names = os.listdir(self.git_dir)
        if seed is None or any(n.startswith("sharedindex.") for n in names):
            return None  # a split index keeps entries in files this copy does not carry
        if any(n.startswith("goldenloop-") for n in names):
            sweep_dead(self.git_dir)  # what a run killed in this moment left
        index, lock = self.git_dir / "index", self.git_dir / "index.lock"
        staged = self.git_dir / f"{temp_prefix('index')}staged"
        try:
            shutil.copyfile(env["GIT_INDEX_FILE"], staged)
            os.chmod(staged, stat.S_IMODE(index.stat().st_mode))  # a shared repository's group rights
            ours = staged.stat().st_ino
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except OSError:  # git is writing it now: leave it to git
            staged.unlink(missing_ok=True)
            return None
        try:
            if self._index_identity() != seed:  # staged to since the copy: theirs stays
                return None
            os.replace(staged, index)
        finally:
            os.close(fd)
            lock.unlink(missing_ok=True)
            staged.unlink(missing_ok=True)
        found = self._index_identity()
        return found if found is not None and found[0] == ours else None

    def _update_index(self, paths: list[str], env: Mapping[str, str] | None = None) -> None:
        """Index entries of `paths` as the working tree has them (gone files: removed)."""
        try:
            self._git("update-index", "--add", "--remove", "--", *paths, env=env)
        except RepoError:  # a nested repository or the like: `add` knows what to make of it
            self._git("add", "--all", "--force", "--", *paths, env=env)

    def _tree_of(self, commit: str) -> str:
        if commit not in self._trees:
            self._trees[commit] = self._loose_tree_of(commit) or self._git("rev-parse", f"{commit}^{{tree}}")
        return self._trees[commit]

    def _loose_tree_of(self, commit: str) -> str | None:
        """A commit's tree read from its loose object (a process spared); None if packed."""
        body = self._loose_commit(commit)
        if body is None or not body.startswith(b"tree "):
            return None
        return body[5:body.index(b"\n")].decode("ascii")

    def _loose_commit(self, commit: str) -> bytes | None:
        """A commit object's bytes, read from its loose file; None if packed (or no commit)."""
        try:
            raw = zlib.decompress((self.common_dir / "objects" / commit[:2] / commit[2:]).read_bytes())
        except (OSError, zlib.error):
            return None
        header, _, body = raw.partition(b"\0")
        return body if header.startswith(b"commit ") else None

    # -- commits made by plumbing -------------------------------------------------------

    def _identity_env(self) -> dict[str, str]:
        """Fallback author/committer variables for whatever identity git has no value for."""
        if self._identity is None:
            self._identity = self._find_identity_env()
        return self._identity

    def _find_identity_env(self) -> dict[str, str]:
        # `git config --get-regexp` exits 1 when nothing matches: not an error here.
        listed = _run(["config", "--name-only", "--get-regexp", IDENTITY_KEYS], cwd=self.root).stdout
        configured = set(listed.lower().split())
        env: dict[str, str] = {}
        for role in ("author", "committer"):
            for field, fallback in (("name", FALLBACK_NAME), ("email", FALLBACK_EMAIL)):
                var = f"GIT_{role.upper()}_{field.upper()}"
                given = os.environ.get(var) or (field == "email" and os.environ.get("EMAIL"))
                if given or {f"user.{field}", f"{role}.{field}"} & configured:
                    continue
                env[var] = fallback
        return env

    def replay(self, commit: str, onto: str) -> str | None:
        """`commit` made again on top of `onto`, as a rebase of that one commit would, but
        without touching a working tree or an index: git merges the trees alone
        (`merge-tree --write-tree`, git 2.38 and later), then `commit-tree` keeps the
        commit's message and author. ReplayConflict when the change conflicts there. None
        where a rebase must do it: no plain loose commit with one parent (a merge, a signed
        one), `onto` not descended from that parent, a change `onto` already holds, an older git."""
        plain = _plain_commit(self._loose_commit(commit))
        if plain is None:
            return None
        parent, author, message = plain
        if parent == onto:
            return commit  # on top of it already: a rebase leaves it as it is
        if _run(["merge-base", "--is-ancestor", parent, onto], cwd=self.root).returncode != 0:
            return None
        merged = _run(["merge-tree", "--write-tree", "--name-only", onto, commit], cwd=self.root)
        if merged.returncode == 1:  # its last message names the conflict
            said = [line for line in merged.stdout.splitlines() if line.strip()]
            raise ReplayConflict(said[-1] if said else "a conflict")
        tree = merged.stdout.partition("\n")[0]
        if merged.returncode != 0 or tree == self._tree_of(onto):
            return None
        sha = self._objects("commit-tree", tree, "-p", onto, "-F", "-", data=message,
                            env={**self._identity_env(), **author}).decode().strip()
        self._trees[sha] = tree
        return sha

    # -- state ----------------------------------------------------------------------

    def _has_commits(self) -> bool:
        try:
            self.head()
        except ValueError:  # HEAD names a branch with no commit yet
            return False
        return True

    def head(self) -> str:
        """HEAD's commit, read from the refs files (a git process per call would add up)."""
        name = "HEAD"
        for _ in range(10):  # a symbolic ref names another ref; a loop is a broken repository
            value = self._read_ref(name)
            if not value.startswith("ref: "):
                self._commits.setdefault(value, value)  # a sha from the refs is a commit
                return value
            name = value.removeprefix("ref: ").strip()
        raise ValueError("HEAD is a loop of symbolic refs")

    def branch(self) -> str | None:
        """The checked-out branch, or None on a detached HEAD."""
        value = self._read_ref("HEAD")
        return value.removeprefix("ref: refs/heads/").strip() if value.startswith("ref: refs/heads/") else None

    def _head_back(self, base: str, branch: str | None) -> None:
        """HEAD at `base` on `branch` (None: detached) as an attempt found it; the tree untouched."""
        why = "goldenloop: HEAD back where the attempt found it"
        if branch is None:
            if self.branch() is not None or self.head() != base:
                self._git("update-ref", "--no-deref", "-m", why, "HEAD", base)
            return
        if self.branch() != branch:  # the agent checked out another branch, or detached HEAD
            self._git("symbolic-ref", "-m", why, "HEAD", f"refs/heads/{branch}")
        if self._branch_tip(branch) != base:
            self._git("update-ref", "-m", why, f"refs/heads/{branch}", base)

    def _branch_tip(self, branch: str) -> str | None:
        try:
            return self._read_ref(f"refs/heads/{branch}")
        except ValueError:  # the agent deleted it
            return None

    def _read_ref(self, name: str) -> str:
        """A ref's content: a sha, or "ref: <other>"; ValueError when it does not exist."""
        for folder in (self.git_dir, self.common_dir):  # HEAD is per worktree, branches shared
            try:
                return (folder / name).read_text().strip()
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                continue
        try:
            packed = (self.common_dir / "packed-refs").read_text()
        except FileNotFoundError:
            packed = ""
        for line in packed.splitlines():
            sha, _, ref = line.partition(" ")
            if ref == name and not line.startswith(("#", "^")):
                return sha
        raise ValueError(f"no ref {name}")

    def contains(self, sha: str) -> bool:
        """Whether commit `sha` is HEAD or one of its ancestors."""
        try:
            self._git("merge-base", "--is-ancestor", sha, "HEAD")
        except RepoError:
            return False
        return True


class Repo(GitPlumbing):
    """The repository as the loop sees it: what an attempt changed, its diff and snapshot,
    exact commits, restore, and the bytes git holds."""

    def dirty_paths(self) -> list[str]:
        """Modified, staged, deleted and untracked (not ignored) paths outside `.openagents/`."""
        return sorted(_outside_openagents(self._status()))

    def dirty_paths_under(self, folder: str) -> list[str]:
        """`dirty_paths` inside `folder` only: git looks at nothing else (cheap in a big tree)."""
        return sorted(self._status(folder))

    def _status(self, *pathspec: str) -> set[str]:
        index, head = self._index_identity(), self.head()
        entries = _split_z(self._git(
            "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames",
            *(("--", *pathspec) if pathspec else ()),
        ))
        if not pathspec:  # the whole index seen: what a commit's `diff-index` would ask
            staged = any(e[0] not in " ?" or e[1] == "A" for e in entries)  # intent-to-add counts
            same = index is not None and self._index_identity() == index and self.head() == head
            self._nothing_staged = (index, head) if same and not staged else None
        return {entry[3:] for entry in entries}

    def _index_identity(self) -> tuple[object, ...] | None:
        """The user's index file as the file system knows it (git replaces the file for
        every change, and any write moves its times) and by the checksum of its content
        that git writes at its end; None when there is no such checksum (index.skipHash)."""
        try:
            with open(self.git_dir / "index", "rb") as index:
                found = os.fstat(index.fileno())
                index.seek(max(found.st_size - 20, 0))
                checksum = index.read(20)
        except OSError:
            return None
        if checksum.count(0) == len(checksum):
            return None
        return found.st_ino, found.st_dev, found.st_size, found.st_mtime_ns, found.st_ctime_ns, checksum

    def untracked(self) -> set[str]:
        """Untracked, not ignored files, as repository-relative posix paths."""
        return set(_split_z(self._git("ls-files", "--others", "--exclude-standard", "-z")))

    def refresh_if_racy(self, path: Path, min_bytes: int = 1 << 20) -> None:
        """When a big file is no older than the index (a fresh clone's checkout), let git
        record its stat data once: every `status` would hash the file again otherwise, as
        ours runs without optional locks and so never writes the index back."""
        try:
            index, stat = (self.git_dir / "index").stat(), path.stat()
        except OSError:
            return
        # Whole seconds, as git compares them unless built with USE_NSEC.
        if stat.st_size >= min_bytes and int(stat.st_mtime) >= int(index.st_mtime):
            wait = int(stat.st_mtime) + 1 - time.time()
            if 0 < wait <= 1:
                time.sleep(wait)  # an index written in the file's own second would leave it racy still
            _run(["update-index", "-q", "--refresh"], cwd=self.root)  # best effort: a busy index is fine

    def _changes(self, base: str, dirty_before: set[str]) -> tuple[set[str], set[str]]:
        """(tracked paths differing from base, untracked files created since), sans .openagents/."""
        base = self._commit_sha(base)
        tracked = set(_split_z(self._git("diff", "--name-only", "-z", "--no-renames", base, "--")))
        created = self.untracked() - dirty_before
        # A path dirty before the subtask is the user's: never the attempt's to commit or undo.
        tracked -= created | dirty_before
        return _outside_openagents(tracked), _outside_openagents(created)

    def changed_files(self, base: str, dirty_before: set[str]) -> list[str]:
        """Files the attempt changed since `base`: tracked edits and deletions, new files."""
        if self._commit_sha(base) == self.head():  # the usual case: one `status` tells
            return sorted(_outside_openagents(self._status() - dirty_before))
        tracked, created = self._changes(base, dirty_before)
        return sorted(tracked | created)

    # -- diffs and snapshots --------------------------------------------------------

    def _diff(self, base: str, dirty_before: set[str], *, binary: bool, paths: list[str] | None = None) -> str:
        paths = self.changed_files(base, dirty_before) if paths is None else sorted(paths)
        if not paths:
            return ""
        base = self._commit_sha(base)
        present = [p for p in paths if _present(self.root, p)]
        flags = [*_DIFF_FLAGS, "--binary"] if binary else list(_DIFF_FLAGS)
        # What the user staged cannot change a diff of `base` against the working tree: the
        # index only says which paths there are, and intent-to-add puts in those it lacks
        # (new files, shown in full without hashing them; a tracked entry is left as it is).
        with self._scratch_index(base, replaced=None) as env:
            if present:
                self._git("add", "--intent-to-add", "--force", "--", *present, env=env)
            return self._git("diff", *flags, base, "--", *paths, env=env, strip=False)

    def diff(self, base: str, dirty_before: set[str], max_bytes: int | None = None) -> str:
        """A unified diff of the attempt's changes, new files in full, cut at `max_bytes`."""
        return _truncate(self._diff(base, dirty_before, binary=False), max_bytes)

    def commits_diff(self, commits: list[str], max_bytes: int | None = None) -> str:
        """What exactly these commits changed, each with its subject, cut at `max_bytes`."""
        if not commits:
            return ""
        return _truncate(self._git("show", "--no-color", "--format=commit %h %s", *commits, strip=False), max_bytes)

    def snapshot(self, base: str, dirty_before: set[str], paths: list[str] | None = None) -> str:
        """The attempt's changes as a binary-safe patch that `apply_snapshot` brings back;
        `paths`: the changed files when the caller has just listed them (a `status` spared)."""
        return self._diff(base, dirty_before, binary=True, paths=paths)

    def apply_snapshot(self, patch: str) -> None:
        """Apply a `snapshot` to the working tree (normally right after `restore`)."""
        if not patch.strip():
            return
        with tempfile.TemporaryDirectory(prefix=temp_prefix("patch"), dir=private_temp()) as tmp:
            patch_file = Path(tmp) / "snapshot.patch"
            patch_file.write_bytes(os.fsencode(patch))
            try:
                self._git("apply", "--whitespace=nowarn", str(patch_file))
            except RepoError as exc:
                raise RepoError(f"the snapshot does not apply to {self.root}: {exc}") from exc

    # -- writing --------------------------------------------------------------------

    def commit(self, paths: list[str], message: str, *, before_ref: Callable[[str, str], None] | None = None,
               contents: Mapping[str, bytes | None] | None = None, judged: str | None = None) -> str:
        """Commit exactly `paths` (additions, edits, deletions) on top of HEAD; return the sha.

        `contents`: paths committed with these bytes (None: removed), not the working tree's.
        `judged`: the tree the checks passed (`tree_with` of these paths), committed whatever
        the files hold now. The commit is built on a private index
        (`write-tree`, `commit-tree`); then, as git does, the user's index takes these
        paths' new entries and HEAD moves last (`update-ref`): a kill between the two
        leaves the commit staged, never its reversal. Anything else the user staged stays
        staged. Hooks do not run: the change was verified. `before_ref(old, new)` is called
        once the commit exists, before the user's index or HEAD changes (the journal's
        record, for recovery after a kill).
        """
        if not paths:
            raise RepoError("nothing to commit: no paths were given")
        head = self.head()
        present, given = self._staged_paths(head, paths, contents)
        with self._seeded_index(head, [*present, *given]) as (env, seed):
            self._stage(present, given, env)
            tree = self._git("write-tree", env=env)
            moved = judged is not None and tree != judged  # a file changed after it was judged
            tree, seed = (judged, None) if moved else (tree, seed)  # type: ignore[assignment]
            if tree == self._tree_of(head):
                raise RepoError(f"nothing to commit: {', '.join(paths)} match HEAD")
            sha = self._git("commit-tree", tree, "-p", head, "-m", message, env=self._identity_env())
            if before_ref is not None:
                before_ref(head, sha)
            installed = self._install_index(env, seed)  # the user's index: what was just committed
        if installed is None and moved:  # the index as committed; the later bytes stay in the files
            self._git("reset", "--quiet", sha, "--", *paths)
        elif installed is None:
            self._stage(present, given)
        self._git("update-ref", "-m", f"commit: {message.splitlines()[0]}", "HEAD", sha, head)
        # Nothing staged before, only what was committed since: nothing staged still.
        clean = installed is not None and self._nothing_staged == (seed, head)
        self._nothing_staged = (installed, sha) if clean else None
        self._trees[sha] = tree
        logger.info("committed %d path(s) as %s", len(present) + len(given), sha[:12])
        return sha

    def tree_with(self, paths: list[str]) -> str:
        """HEAD's tree with `paths` as the working tree has them: what `commit` would record."""
        head = self.head()
        if not paths:
            return self._tree_of(head)
        present, gone = self._staged_paths(head, paths, None)  # gone: removed (None)
        with self._scratch_index(head, [*present, *gone]) as env:
            self._stage(present, gone, env)
            return self._git("write-tree", env=env)

    def _staged_paths(self, head: str, paths: list[str], contents: Mapping[str, bytes | None] | None
                      ) -> tuple[list[str], dict[str, bytes | None]]:
        """(paths staged from the working tree, paths staged from given bytes) of a commit."""
        given = {p: contents[p] for p in paths if contents and p in contents}
        present = [p for p in paths if p not in given and _present(self.root, p)]
        gone = [p for p in paths if p not in given and p not in present]
        if gone:  # a deletion can only be staged for a path the base tree knows
            known = self._paths_in_tree(head, gone)
            given |= {p: None for p in gone if p in known}
        return present, given

    def _stage(self, paths: list[str], given: Mapping[str, bytes | None], env: Mapping[str, str] | None = None) -> None:
        """Index entries of `paths` from the working tree and of `given` from their bytes."""
        if paths:
            self._update_index(paths, env)
        for path, data in given.items():
            if data is None:
                self._git("update-index", "--force-remove", "--", path, env=env)
            else:
                blob = self._objects("hash-object", "-w", "--no-filters", "--stdin", data=data).decode().strip()
                self._git("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)

    def finish_commit(self, paths: list[str], old: str, new: str) -> bool:
        """Finish a commit of `paths` from `old` to `new` that a killed run began: the user's
        index entries as `new` has them, then HEAD moved on from `old`. False (nothing done)
        when HEAD is neither: someone committed since, and history is never rewritten."""
        head = self.head()
        if head not in (old, new):
            return False
        self._git("reset", "--quiet", new, "--", *paths)
        if head == old:
            self._git("update-ref", "-m", "goldenloop: a commit a killed run began", "HEAD", new, old)
        return True

    def fold_commits_since(self, base: str, branch: str | None = None) -> list[str]:
        """Commits made on top of `base` (an agent that commits its own work) become changes
        in the tree again: HEAD goes back to `base` on `branch` (None: detached), the tree is
        kept, the index entries of their paths go back to `base`. Returns those paths; []
        when HEAD is `base`. HistoryRewritten when HEAD went to history that does not build
        on `base` (an amend, a reset, another branch's commits): HEAD is put back all the same.
        """
        head = self.head()
        self._head_back(base, branch)
        if head == base:
            return []
        try:
            self._git("merge-base", "--is-ancestor", base, head)
        except RepoError:
            self._openagents_back(base)
            raise HistoryRewritten(
                f"the attempt moved HEAD from {base[:12]} to {head[:12]}, which does not build on it (a commit "
                f"--amend, a reset, or a checkout of other history); HEAD is back on {base[:12]}"
            ) from None
        paths = _split_z(self._git("diff", "--name-only", "-z", "--no-renames", base, head))
        self.align_index(paths)
        logger.info("folded the commits %s..%s back into the tree", base[:12], head[:12])
        return paths

    def _openagents_back(self, base: str) -> None:
        """goldenloop's committed files that history of another line took from the tree, back."""
        tracked = _split_z(self._git("ls-tree", "-r", "-z", "--name-only", base, "--", OPENAGENTS))
        missing = [path for path in tracked if not (self.root / path).exists()]
        if missing:
            self._git("checkout", base, "--", *missing)

    def align_index(self, paths: list[str]) -> None:
        """The user's index entries of `paths` as HEAD has them (after goldenloop committed them)."""
        if paths:
            self._git("reset", "--quiet", "--", *paths)

    # -- bytes git can give back --------------------------------------------------------

    def blob(self, rev: str, path: str) -> bytes | None:
        """The bytes of `path` in commit `rev`; None when it has no such file."""
        try:
            return self._objects("cat-file", "blob", f"{rev}:{path}")
        except RepoError:
            return None

    def hold(self, paths: Iterable[str]) -> None:
        """Write these files' bytes into git's object store: once held, overwriting them
        loses nothing (an attempt's output, the moment it is made)."""
        files = self._plain_files(paths)
        if files:
            self._objects("hash-object", "-w", "--no-filters", "--stdin-paths", data=_lines_of(files))

    def held(self, paths: Iterable[str]) -> set[str]:
        """Of `paths`, the files whose exact bytes git's object store holds."""
        files = self._plain_files(paths)
        if not files:
            return set()
        ids = self._objects("hash-object", "--no-filters", "--stdin-paths", data=_lines_of(files)).decode().split()
        found = self._objects("cat-file", "--batch-check", data=_lines_of(ids)).decode().splitlines()
        return {path for path, line in zip(files, found, strict=True) if not line.endswith(" missing")}

    def _plain_files(self, paths: Iterable[str]) -> list[str]:
        """Regular files (not links) whose names git reads one a line."""
        return [p for p in paths if "\n" not in p and (self.root / p).is_file() and not (self.root / p).is_symlink()]

    def restore(self, base: str, dirty_before: set[str],
                keep: Callable[[list[str]], object] | None = None) -> list[str]:
        """Undo the attempt: tracked files back to `base`, files it created removed.

        Pre-existing untracked files and `.openagents/` are left alone; HEAD does not move.
        `keep` is given the paths about to be undone before anything changes. Returns the
        restored or removed paths, sorted.
        """
        tracked, created = self._changes(base, dirty_before)
        if keep is not None and (tracked or created):
            keep(sorted(tracked | created))
        if tracked:
            base = self._commit_sha(base)
            self._git("restore", f"--source={base}", "--staged", "--worktree", "--", *tracked)
        for path in sorted(created):
            self._remove_created(path)
        restored = sorted(tracked | created)
        if restored:
            logger.info("restored %d path(s) to %s", len(restored), base[:12])
        return restored

    def _remove_created(self, path: str) -> None:
        """Delete a file the attempt created, then the folders that are now empty."""
        target = self.root / path
        if not target.is_dir() or target.is_symlink():  # a real folder is one a link stood in for: back now
            target.unlink(missing_ok=True)
        folder = target.parent
        while folder != self.root and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
            folder = folder.parent


def tree_patch(repo: GitPlumbing, base: str, tree: str, paths: list[str]) -> str:
    """What a commit of the tree object `tree` changes of `paths` since `base`, as a
    `Repo.snapshot` is: two trees compared, so no index is made and one git process runs."""
    if not paths:
        return ""
    return repo._git("diff", *_DIFF_FLAGS, "--binary", repo._commit_sha(base), tree, "--", *sorted(paths),
                     strip=False)
