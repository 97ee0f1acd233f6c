"""Path safety: an edit may only touch regular files inside the repository, never `.git`."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from orchestrator.edits.base import EditError


def safe_path(repo_dir: Path, rel: str) -> Path:
    """The resolved location of `rel` inside `repo_dir`, or EditError when it is unsafe.

    Refused: empty or absolute paths, `..` components, anything in a `.git` directory or
    in `.openagents/`, and paths that leave the repository through a symlink (of the file
    or a parent).
    """
    if not rel or not rel.strip() or "\x00" in rel:
        raise EditError(f"refused path {rel!r}: empty or invalid")
    pure = PurePosixPath(rel.replace("\\", "/"))
    if pure.is_absolute() or rel.startswith("~") or re.match(r"^[A-Za-z]:[\\/]", rel):
        raise EditError(
            f"refused path {rel!r}: absolute paths are not allowed; "
            "use a path relative to the repository root"
        )
    if ".." in pure.parts:
        raise EditError(f"refused path {rel!r}: outside the repository ('..' is not allowed)")
    if _in_git_dir(pure.parts):
        raise EditError(f"refused path {rel!r}: inside .git")
    if pure.parts and pure.parts[0] == ".openagents":
        # The tasks, the config (the test commands) and the memory judge the attempt.
        raise EditError(f"refused path {rel!r}: .openagents/ is goldenloop's own state, not the task's")
    root = repo_dir.resolve()
    try:
        target = (root / pure).resolve()  # follows symlinks of the file and its parents
    except (OSError, RuntimeError):  # Python reports a symlink loop as RuntimeError
        raise EditError(f"refused path {rel!r}: it cannot be resolved (a symlink loop?)") from None
    if not target.is_relative_to(root):
        raise EditError(f"refused path {rel!r}: outside the repository")
    if _in_git_dir(target.relative_to(root).parts):
        raise EditError(f"refused path {rel!r}: inside .git")
    return target


def _in_git_dir(parts: tuple[str, ...]) -> bool:
    # Case-insensitive: on macOS and Windows ".GIT" is the same directory.
    return any(part.lower() == ".git" for part in parts)
