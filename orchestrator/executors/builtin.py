"""The builtin executor: ask the model for edit blocks, then apply them to the tree.

The user message carries the loop's prompt and as many of the repository's files as fit
in a byte budget — files the loop hinted at first, then files the prompt names, then the
other tracked text files, smallest first. Everything is redacted before it is sent.
A reply that cannot be parsed or applied is an unsuccessful result whose error tells the
next attempt what to fix; model trouble (ModelError) is left to the loop.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from orchestrator.executors.base import ExecutionRequest, ExecutionResult
from orchestrator.executors.edits import EditError, apply_edits, parse_edits, safe_path
from reflection.llm import ChatModel, ChatReply
from reflection.redact import redact

log = logging.getLogger("goldenloop.executors.builtin")

SYSTEM_PROMPT = """\
You are a careful software engineer working inside a git repository. You are given a \
subtask and the contents of relevant files. Make the smallest change that completes the \
subtask. You cannot run commands: reply only with edit blocks, which are applied to the \
files, after which the project's checks run.

Edit format. For each change write the file's path (relative to the repository root) on \
its own line, then a block:

src/calc.py
<<<<<<< SEARCH
def add(a, b):
    return a - b
=======
def add(a, b):
    return a + b
>>>>>>> REPLACE

Rules:
- SEARCH lines are copied exactly from the file, whitespace and comments included, and \
must match exactly one place: add neighbouring lines when they would match more than once.
- Keep SEARCH short: the lines to change plus a little context. Use several blocks for \
several changes, in file order.
- To create a file, or to rewrite one completely, write its path, then \
<<<<<<< FILE, the full content, and >>>>>>> FILE.
- To delete a file, write its path, then <<<<<<< DELETE and >>>>>>> DELETE on the next line.
- Never edit anything in .git or outside the repository.
- A short explanation before the blocks is fine; do not repeat file contents elsewhere.
"""

# Lock files are large and machine-written: never worth the model's context.
_LOCK_NAMES = frozenset(
    {
        "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml",
        "poetry.lock", "Pipfile.lock", "uv.lock", "pdm.lock", "Cargo.lock",
        "Gemfile.lock", "composer.lock", "go.sum", "flake.lock", "bun.lockb",
    }
)
_PATH_TOKEN = re.compile(r"[\w./-]+")
_MAX_OMITTED_NAMES = 100  # a huge repository must not flood the prompt with names


@dataclass
class RepoContext:
    """The files chosen for the prompt (path, redacted text) and those that did not fit."""

    files: list[tuple[str, str]] = field(default_factory=list)
    omitted: list[str] = field(default_factory=list)


class BuiltinExecutor:
    """Edits the repository with one model call per attempt."""

    name = "builtin"

    def __init__(
        self, model: ChatModel, *, max_context_bytes: int = 60000, timeout_s: float = 120.0
    ) -> None:
        self.model = model
        self.max_context_bytes = max_context_bytes
        self.timeout_s = timeout_s

    async def execute(self, request: ExecutionRequest) -> ExecutionResult:
        context = await gather_context(
            request.repo_dir, request.prompt, request.hint_paths, self.max_context_bytes
        )
        messages = build_messages(request.prompt, context)
        reply = await self.model.complete(messages, timeout=self.timeout_s)
        usage = _usage(reply)
        try:
            edits = parse_edits(reply.text)
            touched = await anyio.to_thread.run_sync(apply_edits, request.repo_dir, edits)
        except EditError as exc:
            log.info("attempt %d: reply not applied: %s", request.attempt, exc)
            return ExecutionResult(ok=False, error=str(exc), reply=reply.text, usage=usage)
        log.info("attempt %d: %d edits applied to %s", request.attempt, len(edits), touched)
        return ExecutionResult(ok=True, touched=touched, reply=reply.text, usage=usage)


def build_messages(prompt: str, context: RepoContext) -> list[dict[str, str]]:
    """The system message (role and edit format) and the user message (prompt and files)."""
    parts = ["# Subtask", "", redact(prompt).strip(), "", "# Repository files", ""]
    if not context.files:
        parts += ["(no file contents included)", ""]
    for path, text in context.files:
        parts.append(_file_section(path, text))
    if context.omitted:
        omitted = _omitted_list(context.omitted)
        parts += [f"Files not shown (over the context budget): {omitted}", ""]
    parts.append("Reply with edit blocks in the format described.")
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "\n".join(parts)},
    ]


def _file_section(path: str, text: str) -> str:
    # A fence longer than any backtick run inside the file keeps the file in one piece.
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * (longest + 1)
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"## {path}\n{fence}\n{body}{fence}\n"


def _omitted_list(omitted: list[str]) -> str:
    shown = ", ".join(omitted[:_MAX_OMITTED_NAMES])
    rest = len(omitted) - _MAX_OMITTED_NAMES
    return shown + (f" and {rest} more" if rest > 0 else "")


def _usage(reply: ChatReply) -> dict[str, Any]:
    return {
        "inputTokens": reply.input_tokens,
        "outputTokens": reply.output_tokens,
        "costUsd": reply.cost_usd,
        "model": reply.model,
        "latencyS": reply.latency_s,
    }


# --------------------------------------------------------------------------- context


async def gather_context(
    repo_dir: Path, prompt: str, hint_paths: list[str], budget: int
) -> RepoContext:
    """Choose the files to show the model, within `budget` bytes of (redacted) content."""
    listed = await _list_files(repo_dir)
    ordered = _candidates(repo_dir, prompt, hint_paths, listed)
    return await anyio.to_thread.run_sync(_read_within, repo_dir, ordered, budget)


async def _list_files(repo_dir: Path) -> list[str]:
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


def _candidates(repo_dir: Path, prompt: str, hint_paths: list[str], listed: list[str]) -> list[str]:
    """Hinted files, then files the prompt names, then the rest smallest first; no repeats."""
    mentioned = _mentioned(prompt, listed)
    rest = sorted(
        (name for name in listed if _eligible(name)), key=lambda name: (_size(repo_dir, name), name)
    )
    chosen: dict[str, None] = {}
    for name in [*hint_paths, *mentioned, *rest]:
        if _eligible(name):
            chosen.setdefault(name.removeprefix("./"), None)
    return list(chosen)


def _mentioned(prompt: str, listed: list[str]) -> list[str]:
    """Listed files the prompt names, in order of mention.

    A token names a file by its repo path, by a path ending in it (a diff's `a/src/x.py`,
    an absolute path into the repository) or by a file name only one listed file has.
    """
    by_path = set(listed)
    by_name: dict[str, list[str]] = {}
    for name in listed:
        by_name.setdefault(name.rsplit("/", 1)[-1], []).append(name)
    found: list[str] = []
    for token in _PATH_TOKEN.findall(prompt):
        token = token.removeprefix("./").rstrip(".")
        match = _path_suffix(token, by_path)
        if match is None and "." in token and len(by_name.get(token, [])) == 1:
            match = by_name[token][0]
        if match is not None:
            found.append(match)
    return found


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
        size = len(_file_section(name, text).encode("utf-8"))
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
