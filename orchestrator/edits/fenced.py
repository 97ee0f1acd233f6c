"""Fenced code blocks: the whole file (or, in Python, whole functions) under its path.

This is what small models write most reliably: a path, then a ```` ``` ```` block with
the code. The path may sit on the line before the fence (`solution.py`, `**solution.py**`,
`Here is solution.py:`), in the fence's info string (```` ```python solution.py ````),
or on the block's first line (`# solution.py`). A block with no path gets path "" and
the resolver finds its file or refuses. Blocks of shell commands or program output are
not code to apply and are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from orchestrator.edits.base import Edit, EditError, join_lines
from orchestrator.edits.markers import clean_path

_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`]*?)[ \t]*$")
_EXTENSIONS = (
    "py pyi js jsx mjs cjs ts tsx go rs java kt kts scala c h cc cpp hpp cs rb php swift m "
    "sh bash zsh sql md rst txt json toml yaml yml ini cfg conf xml html htm css scss vue svelte "
    "lua pl r jl ex exs erl hs ml dart gradle"
).split()
_PATHLIKE = re.compile(r"^[\w.@+-]*(?:/[\w.@+-]+)*\.(?:" + "|".join(_EXTENSIONS) + r")$", re.IGNORECASE)
# Files without an extension count as a path when alone on the line before a block.
_NO_EXTENSION = re.compile(
    r"^(?:[\w.@+-]+/)*(?:Makefile|Dockerfile|Containerfile|Procfile|Gemfile|Rakefile|Justfile|"
    r"Vagrantfile|LICENSE|README|CODEOWNERS|\.[\w.-]+)$|^(?:[\w.@+-]+/)+[\w@+-]+$"
)
_TOKEN = re.compile(r"[\w./@+-]+")
_COMMENT_PATH = re.compile(
    r"^\s*(?:#|//|--|;|/\*|<!--)\s*(?:(?:file|path|filename)\s*:\s*)?(?P<path>\S+?)\s*(?:\*/|-->)?\s*$",
    re.IGNORECASE,
)
_NOT_CODE = frozenset({"bash", "sh", "shell", "console", "zsh", "text", "txt", "output", "plaintext", "log"})


@dataclass
class FencedBlock:
    info: str  # the fence's info string ("python", "python solution.py", "")
    body: list[str]
    label: str  # the line before the opening fence, "" when none
    closed: bool


def has_fences(reply: str) -> bool:
    return any(_OPEN.match(line) for line in reply.splitlines())


def fenced_blocks(reply: str) -> list[FencedBlock]:
    """Every fenced block in order; the last may be unclosed (a reply cut short)."""
    lines = reply.splitlines()
    blocks: list[FencedBlock] = []
    index, after_block = 0, 0
    while index < len(lines):
        opened = _OPEN.match(lines[index])
        if opened is None:
            index += 1
            continue
        fence, indent = opened.group("fence"), opened.group("indent")
        label = _line_before(lines, index, after_block)
        body: list[str] = []
        index += 1
        closed = False
        while index < len(lines):
            line = lines[index]
            stripped = line.strip()
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                closed = True
                break
            body.append(line[len(indent):] if line.startswith(indent) else line)
            index += 1
        blocks.append(FencedBlock(info=opened.group("info").strip(), body=body, label=label, closed=closed))
        index += 1
        after_block = index
    return blocks


def _line_before(lines: list[str], index: int, floor: int) -> str:
    for back in range(index - 1, floor - 1, -1):
        if lines[back].strip():
            return lines[back].strip()
    return ""


def parse_fenced(reply: str, *, truncated: bool = False) -> list[Edit]:
    """A `block` edit per fenced code block; EditError when the last one was cut off."""
    reply = _heading_fenced(reply)
    edits = []
    carried = ""  # a block holding nothing but a path names the block after it
    for block in fenced_blocks(reply):
        path = _info_path(block.info) or label_path(block.label) or carried
        body = block.body
        carried = ""
        if _only_a_path(body):
            carried = body[0].strip() if block.closed else ""
            continue
        first = _first_line_path(body)
        if first is not None:
            path = path or first
            body = body[1:]
        language = block.info.split()[0].lower() if block.info.split() else ""
        if not path and language in _NOT_CODE:
            continue
        if not any(line.strip() for line in body):
            continue
        if not block.closed and truncated:
            where = f" for {path}" if path else ""
            raise EditError(
                f"the reply was cut off at the model's output limit inside the code block{where}, "
                "so the code is incomplete; write shorter code (a loop or a formula rather than "
                "listing cases one by one) and close the block"
            )
        edits.append(Edit(path=path, kind="block", replace=join_lines(body)))
    return edits


_HEADING = re.compile(r"^\s*#{1,6}\s+(?P<path>\S+)\s*$")
_BARE_FENCE = re.compile(r"^\s*(?:`{3,}|~{3,})\s*$")


def _heading_fenced(reply: str) -> str:
    """The reply with a fence put round a file's code where a small model fenced the file's
    heading instead: it copies the prompt's `# Repository files` / `## solution.py` lines
    inside a block, then writes the code bare, then a lone fence. Else unchanged."""
    lines = reply.splitlines()
    for start, line in enumerate(lines):
        if not _OPEN.match(line):
            continue
        end = next((i for i in range(start + 1, len(lines)) if _BARE_FENCE.match(lines[i])), None)
        if end is None:
            return reply
        heads = [h.strip() for h in lines[start + 1:end] if h.strip()]
        named = _HEADING.match(heads[-1]) if heads and all(h.startswith("#") for h in heads) else None
        if named is None or not _PATHLIKE.match(named.group("path")):
            return reply
        stop = next((i for i in range(end + 1, len(lines)) if _OPEN.match(lines[i])), len(lines))
        code = lines[end + 1:stop]
        if not any(c.strip() for c in code):
            return reply
        after = lines[stop + 1:] if stop < len(lines) and _BARE_FENCE.match(lines[stop]) else lines[stop:]
        return "\n".join([*lines[:start], named.group("path"), "```", *code, "```", *after]) + "\n"
    return reply


def _info_path(info: str) -> str | None:
    """A path in the fence's info string: ```python solution.py, ```solution.py, ```py:a.py."""
    for token in re.split(r"[\s:]+", info):
        token = token.strip("`'\"")
        if _PATHLIKE.match(token) and not token.startswith("."):
            return token
    return None


def label_path(label: str) -> str:
    """The path a line before a block names: the whole line, or the one path-like token."""
    if not label:
        return ""
    whole = (clean_path(label) or "").rstrip(":")
    if whole and (_PATHLIKE.match(whole) or _NO_EXTENSION.match(whole)):
        return whole
    tokens = {t.strip(".:,;()") for t in _TOKEN.findall(label.replace("`", " ").replace("*", " "))}
    paths = [t for t in tokens if _PATHLIKE.match(t) and not t.startswith(".")]
    return paths[0] if len(paths) == 1 else ""


def _only_a_path(body: list[str]) -> bool:
    code = [line.strip() for line in body if line.strip()]
    return len(code) == 1 and bool(_PATHLIKE.match(code[0]))


def _first_line_path(body: list[str]) -> str | None:
    """A path alone on the block's first line, bare or as a comment (`# solution.py`)."""
    if len(body) < 2:
        return None
    first = body[0].strip()
    if _PATHLIKE.match(first):
        return first
    match = _COMMENT_PATH.match(first)
    if match and _PATHLIKE.match(match.group("path")):
        return match.group("path")
    return None
