"""What a tree needs to run but git does not carry: a `.venv`, `node_modules`, `.env` files.

A parallel worker's worktree and the judge's tree each get the ignored paths of the
repository that `worktree.link` (shared with the checkout) and `worktree.copy` (a copy
of their own) name. Only paths git ignores are provided: anything else would look like
an attempt's own change, or a file the commit does not hold.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.git.repo import NO_HOOKS


@dataclass(frozen=True)
class Provided:
    """The ignored paths of `root` to link and to copy into another tree."""

    root: Path
    link: tuple[Path, ...] = ()
    copy: tuple[Path, ...] = ()

    @classmethod
    def of(cls, root: Path, link: Sequence[str] = (), copy: Sequence[str] = ()) -> Provided:
        return cls(root, tuple(ignored_matches(root, link)), tuple(ignored_matches(root, copy)))

    @property
    def names(self) -> list[str]:
        """Their repository-relative paths."""
        return [source.relative_to(self.root).as_posix() for source in (*self.link, *self.copy)]

    def into(self, target_root: Path) -> None:
        """Link and copy them into `target_root`, where nothing stands there yet."""
        for sources, how in ((self.link, "link"), (self.copy, "copy")):
            for source in sources:
                target = target_root / source.relative_to(self.root)
                if target.exists() or target.is_symlink():  # tracked, or provided already
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                if how == "link":
                    target.symlink_to(source, target_is_directory=source.is_dir())
                elif source.is_dir():
                    shutil.copytree(source, target, symlinks=True)
                else:
                    shutil.copy2(source, target)


    def contents(self) -> dict[str, tuple[int, int]]:
        """What the linked paths hold: each entry's size and modification time by path. The
        judge's tree shares them with the checkout, and a shared `.venv` is what runs the
        tests: an attempt must leave them as it found them."""
        found: dict[str, tuple[int, int]] = {}
        for source in self.link:
            for current, dirs, files in os.walk(source):
                for name in (*dirs, *files):
                    path = os.path.join(current, name)
                    try:
                        seen = os.lstat(path)
                    except OSError:
                        continue
                    found[os.path.relpath(path, self.root)] = (seen.st_size, seen.st_mtime_ns)
        return found


def changed_between(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    """The paths added, removed or changed from one `contents` to the next, files before the
    folders that hold them."""
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    return sorted(changed, key=lambda p: any(other.startswith(f"{p}/") for other in changed))


def ignored_matches(root: Path, globs: Sequence[str]) -> list[Path]:
    """The paths of `root` that `globs` match and git ignores."""
    matches = sorted({p for glob in globs for p in root.glob(glob)} - {root / ".git"})
    if not matches:
        return []
    names = "".join(os.fsdecode(p.relative_to(root)) + "\0" for p in matches)
    done = subprocess.run(["git", *NO_HOOKS, "check-ignore", "-z", "--stdin"], cwd=root, input=names.encode(),
                          capture_output=True, check=False)
    ignored = {os.fsdecode(item) for item in done.stdout.split(b"\0") if item}
    return [p for p in matches if os.fsdecode(p.relative_to(root)) in ignored]
