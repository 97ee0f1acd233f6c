"""The judge's tree: a folder holding exactly the files of one tree object, where the
checks run.

It lives outside the repository and the system's temporary folder, in goldenloop's own
(`orchestrator.tempfiles.private_temp`), which no agent may write, and is written by
goldenloop from git's objects, byte for byte, before every run of the checks:

- the blobs are read with `cat-file --batch` and their hashes checked, so a replaced or
  corrupted object, a checkout filter (`.gitattributes`, a smudge command), sparse or
  skip-worktree settings never change what the checks see;
- what the folder holds is remembered in memory, not in an index a process could edit:
  from one tree to the next only the files that differ are written, and every other file
  whose metadata moved since goldenloop wrote it (a run, or anyone else, changed it) is
  written again; whatever else is found there (caches, byte code, files a test wrote) is
  removed.

What the agent's tree holds besides the commit (ignored or untracked files, build output)
never reaches it; the ignored paths the project names in `worktree.link` and
`worktree.copy` (a `.venv`, `node_modules`) are provided, as for a parallel worker's
worktree. A link whose target leaves the tree is written as it is; the judge refuses a
candidate that adds one (`escaping`).

The checks import the exported code, not the checkout's: the folder itself and its
`src/` lead PYTHONPATH, ahead of an editable install's path to the user's checkout.
`checks.setup` commands run after each checkout, before the checks.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from orchestrator.git.provided import Provided
from orchestrator.git.repo import GitPlumbing, RepoError
from orchestrator.tempfiles import private_temp, temp_prefix

SOURCE_FOLDERS = ("src",)  # a src/ layout's packages: imported from the export, never the checkout
LINK, GITLINK, EXECUTABLE = "120000", "160000", "100755"
Entry = tuple[str, str]  # (mode, object id)
Seen = tuple[int, int, int, int, int]  # what a file's metadata was when goldenloop wrote it


class JudgeTree:
    """One export, brought to the next tree before each run; `path` is where the checks run."""

    def __init__(self, repo: GitPlumbing, provided: Provided | None = None, home: Path | None = None) -> None:
        self.repo, self.provided = repo, provided
        self.home = Path(tempfile.mkdtemp(prefix=temp_prefix("judge"), dir=home or private_temp()))
        self.path = self.home / "tree"
        self.path.mkdir()
        self.tree: str | None = None  # the tree it holds, once checked out
        self.entries: dict[str, Entry] = {}
        self.seen: dict[str, Seen] = {}
        self.escaping: set[str] = set()  # links whose target leaves the tree

    def check_out(self, tree: str) -> None:
        """The folder holds exactly `tree`'s files, and the provided paths."""
        entries = tree_entries(self.repo, tree)
        stale = [p for p, entry in entries.items() if self.entries.get(p) != entry or not self._intact(p)]
        for path in [p for p in self.entries if p not in entries]:
            _remove(self.path / path)
        self.entries = entries
        for path, data in zip(stale, read_blobs(self.repo, [entries[p][1] for p in stale]), strict=True):
            self._write(path, entries[path][0], data)
        self._sweep()
        if self.provided is not None:
            self.provided.into(self.path)
        self.tree = tree

    def _intact(self, path: str) -> bool:
        try:
            return _seen(os.lstat(self.path / path)) == self.seen.get(path)
        except OSError:
            return False

    def _write(self, path: str, mode: str, data: bytes) -> None:
        target = self.path / path
        _clear_way(self.path, target)
        self.escaping.discard(path)
        if mode == LINK:
            os.symlink(os.fsdecode(data), target)
            if _leaves(self.path, target, os.fsdecode(data)):
                self.escaping.add(path)
        elif mode == GITLINK:  # a submodule: its folder, empty, as a clone without --recursive has it
            target.mkdir()
        else:
            target.write_bytes(data)
            target.chmod(0o755 if mode == EXECUTABLE else 0o644)
        self.seen[path] = _seen(os.lstat(target))

    def _sweep(self) -> None:
        """Remove what the tree does not hold: what a run wrote, left, or changed the kind of."""
        keep = set(self.provided.names) if self.provided is not None else set()
        folders = {str(Path(p).parent) for p in self.entries} | {"."}
        folders |= {str(parent) for p in folders for parent in Path(p).parents}
        for current, dirs, files in os.walk(self.path):
            relative = os.path.relpath(current, self.path)
            for name in [*files, *dirs]:
                path = os.path.normpath(os.path.join(relative, name))
                if path in keep or path in self.entries or (name in dirs and path in folders):
                    continue
                _remove(self.path / path)
            dirs[:] = [d for d in dirs if os.path.normpath(os.path.join(relative, d)) in folders]

    def environment(self) -> dict[str, str]:
        """The checks' environment: the project's own, with the export's code first on
        Python's path."""
        lead = [str(self.path / folder) for folder in SOURCE_FOLDERS if (self.path / folder).is_dir()]
        lead.append(str(self.path))
        rest = os.environ.get("PYTHONPATH")
        return {**os.environ, "PYTHONPATH": os.pathsep.join([*lead, *([rest] if rest else [])])}

    def remove(self) -> None:
        shutil.rmtree(self.home, ignore_errors=True)


def tree_entries(repo: GitPlumbing, tree: str) -> dict[str, Entry]:
    """Every file of `tree`: its path, mode and object id."""
    entries = {}
    for item in repo.git("ls-tree", "-r", "-z", "--full-tree", tree).split("\0"):
        if item:
            meta, _, path = item.partition("\t")
            mode, _, oid = meta.split(" ")
            entries[path] = (mode, oid)
    return entries


def read_blobs(repo: GitPlumbing, oids: list[str]) -> Iterator[bytes]:
    """The objects' bytes, in order, each checked against its id: a blob replaced or
    corrupted in the object store is refused, never exported."""
    wanted = [oid for oid in oids if oid and set(oid) != {"0"}]
    out = repo.feed("cat-file", "--batch", data="".join(f"{oid}\n" for oid in wanted).encode()) if wanted else b""
    at = 0
    for oid in oids:
        if oid not in wanted:  # a submodule's commit: nothing to read
            yield b""
            continue
        header_end = out.index(b"\n", at)
        name, kind, size = out[at:header_end].split(b" ")
        data = out[header_end + 1: header_end + 1 + int(size)]
        at = header_end + 2 + int(size)
        digest = (hashlib.sha1 if len(oid) == 40 else hashlib.sha256)(b"%s %d\0" % (kind, len(data)) + data)
        if name.decode() != oid or digest.hexdigest() != oid:
            raise RepoError(f"the object {oid[:12]} in the repository's object store does not hold what its id "
                            "says (corrupted or forged); goldenloop will not judge or commit from it")
        yield data


def _seen(found: os.stat_result) -> Seen:
    return found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns, stat.S_IFMT(found.st_mode)


def _leaves(root: Path, link: Path, target: str) -> bool:
    """Whether a link's target is outside `root` (an absolute path, or `..` past the top)."""
    if os.path.isabs(target):
        return True
    return not os.path.normpath(os.path.join(link.parent, target)).startswith(str(root) + os.sep)


def _clear_way(root: Path, target: Path) -> None:
    """Nothing in the way of writing `target`: no file where a folder must be, nothing there."""
    _remove(target)
    for parent in reversed(target.relative_to(root).parents):
        folder = root / parent
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            _remove(folder)
    target.parent.mkdir(parents=True, exist_ok=True)


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


class JudgeTrees:
    """A run's judge's trees: one per task in flight (parallel workers each lease one),
    kept for the next task, all removed when the run ends."""

    def __init__(self, repo: GitPlumbing, provided: Provided | None = None) -> None:
        self.repo, self.provided = repo, provided
        self._idle: list[JudgeTree] = []
        self._all: list[JudgeTree] = []
        self._lock = threading.Lock()

    @contextmanager
    def lease(self) -> Iterator[JudgeTree]:
        with self._lock:
            tree = self._idle.pop() if self._idle else None
        if tree is None:
            tree = JudgeTree(self.repo, self.provided)
            with self._lock:
                self._all.append(tree)
        try:
            yield tree
        finally:
            with self._lock:
                self._idle.append(tree)

    def close(self) -> None:
        with self._lock:
            trees, self._all, self._idle = self._all, [], []
        for tree in trees:
            tree.remove()
