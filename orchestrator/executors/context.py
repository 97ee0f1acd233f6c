"""The files a model is shown: as many as fit a byte budget, the relevant ones first.

Files the loop hinted at come first, then files the task names, else those that define
the code names it uses (`definers`), then files named elsewhere in the prompt, then the
other tracked text files, smallest first. Lock files, `.openagents/`, binary and non-UTF-8
files are never shown; everything shown is redacted.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from orchestrator.edits import EditError, safe_path
from orchestrator.executors.definers import defining_files
from reflection.redact import redact

log = logging.getLogger("goldenloop.executors.context")

# Lock files are large and machine-written: never worth the model's context.
_LOCK_NAMES = frozenset(
    {
        "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml",
        "poetry.lock", "Pipfile.lock", "uv.lock", "pdm.lock", "Cargo.lock",
        "Gemfile.lock", "composer.lock", "go.sum", "flake.lock", "bun.lockb",
    }
)
_PATH_TOKEN = re.compile(r"[\w./-]+")
_LISTING = 4  # a line naming more files than this lists the repository (a repair hint), not the task's files


@dataclass
class RepoContext:
    """The repository's files, those chosen for the prompt (path, redacted text), and
    those that did not fit."""

    listed: list[str] = field(default_factory=list)
    files: list[tuple[str, str]] = field(default_factory=list)
    omitted: list[str] = field(default_factory=list)
    # What the attempt is about, most likely first: hinted, named by the task, defining its
    # code names (when it names no file), named elsewhere in the prompt.
    in_play: list[str] = field(default_factory=list)


def file_section(path: str, text: str) -> str:
    # A fence longer than any backtick run inside the file keeps the file in one piece.
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * (longest + 1)
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"## {path}\n{fence}\n{body}{fence}\n"


async def gather_context(
    repo_dir: Path, prompt: str, hint_paths: list[str], budget: int, focus: str = ""
) -> RepoContext:
    """Choose the files to show the model, within `budget` bytes of (redacted) content.
    `focus`: the task's own words, read first for the files it is about (default: the prompt)."""
    listed = await list_files(repo_dir)
    focused = _mentioned(focus or prompt, listed)
    defining = [] if hint_paths or focused else await anyio.to_thread.run_sync(
        defining_files, repo_dir, focus or prompt, [n for n in listed if _eligible(n)])
    elsewhere = _mentioned(prompt, listed) if focus else []  # the prompt beyond the task's words
    known = set(listed)
    in_play = list(dict.fromkeys(n for n in [*hint_paths, *focused, *defining, *elsewhere] if n in known))
    context = await anyio.to_thread.run_sync(_read_within, repo_dir, _candidates(repo_dir, in_play, listed), budget)
    context.listed, context.in_play = listed, in_play
    return context


async def list_files(repo_dir: Path) -> list[str]:
    """Tracked files plus untracked, non-ignored ones (an earlier attempt may have made them)."""
    command = ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    try:
        done = await anyio.run_process(command, cwd=repo_dir, check=False)
    except OSError as exc:
        log.warning("cannot list repository files: %s", exc)
        return []
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip()
        log.warning("git ls-files failed in %s: %s", repo_dir, reason)
        return []
    names = done.stdout.decode("utf-8", errors="surrogateescape").split("\0")
    return list(dict.fromkeys(name for name in names if name))


def _candidates(repo_dir: Path, first: list[str], listed: list[str]) -> list[str]:
    """The files in play first, then the rest smallest first; no repeats."""
    rest = sorted(
        (name for name in listed if _eligible(name)), key=lambda name: (_size(repo_dir, name), name)
    )
    chosen: dict[str, None] = {}
    for name in [*first, *rest]:
        if _eligible(name):
            chosen.setdefault(name.removeprefix("./"), None)
    return list(chosen)


def _mentioned(prompt: str, listed: list[str]) -> list[str]:
    """Listed files the prompt names, in order of mention.

    A token names a file by its repo path, by a path ending in it (a diff's `a/src/x.py`,
    an absolute path into the repository) or by a file name only one listed file has. A
    line naming more than a few files lists the repository (the retry's "the repository's
    files are: ..."): it names none of them in particular.
    """
    by_path = set(listed)
    by_name: dict[str, list[str]] = {}
    for name in listed:
        by_name.setdefault(name.rsplit("/", 1)[-1], []).append(name)
    found: list[str] = []
    for line in prompt.splitlines():
        named = [m for m in (_named(t, by_path, by_name) for t in _PATH_TOKEN.findall(line)) if m]
        if len(set(named)) <= _LISTING:
            found += named
    return found


def _named(token: str, by_path: set[str], by_name: dict[str, list[str]]) -> str | None:
    token = token.removeprefix("./").rstrip(".")
    match = _path_suffix(token, by_path)
    if match is None and "." in token and len(by_name.get(token, [])) == 1:
        match = by_name[token][0]
    return match


def _path_suffix(token: str, paths: set[str]) -> str | None:
    """`token`, or the longest tail of it after a `/`, when that is a listed path."""
    candidate = token
    while candidate:
        if candidate in paths:
            return candidate
        _, slash, candidate = candidate.partition("/")
        if not slash:
            return None
    return None


def _eligible(name: str) -> bool:
    parts = name.split("/")
    base = parts[-1]
    return parts[0] != ".openagents" and base not in _LOCK_NAMES and not base.endswith(".lock")


def _size(repo_dir: Path, name: str) -> int:
    try:
        return (repo_dir / name).stat().st_size
    except OSError:
        return 0


def _read_within(repo_dir: Path, names: list[str], budget: int) -> RepoContext:
    context = RepoContext()
    used = 0
    for name in names:
        path = _regular_file(repo_dir, name)
        if path is None or _looks_binary(path):
            continue
        if path.stat().st_size > budget - used:  # cheap check: big repos are not read in full
            context.omitted.append(name)
            continue
        text = _read_text(path)
        if text is None:
            continue  # not UTF-8 text
        size = len(file_section(name, text).encode("utf-8"))
        if used + size > budget:
            context.omitted.append(name)
            continue
        context.files.append((name, text))
        used += size
    return context


def _regular_file(repo_dir: Path, name: str) -> Path | None:
    """The file's location when it is safe to read and a regular file."""
    try:
        path = safe_path(repo_dir, name)
        return path if path.is_file() else None
    except (EditError, OSError):
        return None


def _looks_binary(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return b"\x00" in handle.read(8192)
    except OSError:
        return True


def _read_text(path: Path) -> str | None:
    """The file's redacted text, or None when it is not UTF-8 text."""
    try:
        return redact(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError):
        return None
