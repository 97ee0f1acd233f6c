"""Failure digests: the output of a failed command, cut down to what a model can use.

`make_digest` detects the tool that printed the output (pytest, unittest, a bare Python
traceback, mypy, ruff, tsc, jest, vitest, go test, cargo test, or anything else; the
per-tool parsers live in `reflection.parsers`) and extracts the failing tests, the first
error with its file:line, the pass/fail counts and the last lines, within a token budget.
The rendered text is a small contract: one `Label: value` line per field (`First error: ...`
among them), then the error block and `Last lines:`; `read_digest_line` reads a field back.

The signature is a hash of the normalised essentials only (tool, failing tests, the first
error's type, message and place), so one failure hashes the same across runs whose temp
paths, timings, addresses or unrelated line numbers differ.

Work is bounded on any input: huge outputs are scanned through a head and a tail window,
every pattern is anchored or linear, and every value is clipped before it is rendered.
"""

from __future__ import annotations

import hashlib
import logging
import re

import orjson
from pydantic import BaseModel, ConfigDict

from reflection.parsers import LINE_CLIP, MAX_TESTS, Found, Tool, detect_tool, error_in_pytest_output, parse
from reflection.text import clip_middle, one_line

log = logging.getLogger("goldenloop.digest")

_SCAN_CHARS = 2_000_000  # most of a huge output ever scanned (head + tail windows)
_HEAD_CHARS = 250_000  # how much of that comes from the start of the output
_TAIL_SOURCE_CHARS = 200_000  # slice of the end that "Last lines" are taken from


class Digest(BaseModel):
    """A bounded failure summary and its stable signature."""

    model_config = ConfigDict(frozen=True)

    tool: Tool
    text: str  # what a model sees; estimate_tokens(text) <= max_tokens
    signature: str  # 16 hex chars; equal for the same failure across runs
    failing_tests: list[str]
    first_error: str | None  # "path:line: Kind: message" of the first failure
    passed: int | None  # None when the runner does not print it
    failed: int | None

    @property
    def score(self) -> float | None:
        """Share of tests that passed, or None when the counts are unknown or zero."""
        if self.passed is None or self.failed is None or self.passed + self.failed == 0:
            return None
        return self.passed / (self.passed + self.failed)


def estimate_tokens(text: str) -> int:
    """Rough token count: one token per four characters, rounded up."""
    return -(-len(text) // 4)


def read_digest_line(text: str, label: str) -> str | None:
    """The value of the first `label: value` line of a digest's text, if any."""
    match = re.search(rf"^{re.escape(label)}: ([^\n]*)$", text, re.M)
    return match.group(1) if match else None


def make_digest(output: str, *, max_tokens: int = 1500, command: str | None = None) -> Digest:
    """Digest the raw output of a failed command within `max_tokens` (estimated)."""
    if max_tokens < 0:
        raise ValueError("max_tokens must not be negative")
    text = _prepare(output)
    tool, found = parse(text, command)
    log.debug("digest: tool=%s tests=%d error=%s", tool, len(found.failing_tests), found.error)
    return Digest(
        tool=tool,
        text=_render(tool, command, found, text, max_tokens * 4),
        signature=_signature(tool, found, text),
        failing_tests=list(found.failing_tests),
        first_error=found.error.render() if found.error else None,
        passed=found.passed,
        failed=found.failed,
    )


def error_of_test(output: str, test_id: str, *, command: str | None = None) -> str | None:
    """The first error of one failing test, rendered like `Digest.first_error`.

    A digest's first error is the first failure printed, which may be a test that was
    already failing; this one is the named test's own. Known for pytest, whose output has
    a section (or a summary line) per failing test; None where it cannot be told apart.
    """
    text = _prepare(output)
    if detect_tool(text, command) != "pytest":
        return None
    error = error_in_pytest_output(text, test_id)
    return error.render() if error else None


# --- preparing -----------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")


def _prepare(output: str) -> str:
    """Window a huge output, unify line ends and drop terminal colour codes."""
    if len(output) > _SCAN_CHARS:
        head = output[:_HEAD_CHARS]
        head = head[: head.rfind("\n") + 1] or head
        tail = output[-(_SCAN_CHARS - _HEAD_CHARS) :]
        tail = tail[tail.find("\n") + 1 :] or tail
        skipped = len(output) - len(head) - len(tail)
        output = f"{head}[... {skipped} characters skipped ...]\n{tail}"
    output = output.replace("\r\n", "\n").replace("\r", "\n")
    return _ANSI.sub("", output) if "\x1b" in output else output


# --- rendering within the budget -----------------------------------------------------------------


def _render(tool: Tool, command: str | None, found: Found, text: str, budget: int) -> str:
    """Header fields, then the error block, then the last lines, within `budget` chars."""
    header = _header_lines(tool, command, found, budget)
    parts = ["\n".join(header)]
    room = budget - len(parts[0]) - 1
    if found.block and room > 40:
        block = _fit_lines(found.block.splitlines(), int(room * 0.6) - 8, from_end=False)
        if block:
            parts.append("Error:\n" + block)
            room -= len(parts[-1]) + 1
    # Lines after the block only, so a traceback at the very end is not shown twice.
    tail_start = max(len(text) - _TAIL_SOURCE_CHARS, found.block_end if found.block else 0)
    tail_lines = text[tail_start:].splitlines()
    if len(tail_lines) > 1 and tail_start > 0 and text[tail_start - 1] != "\n":
        tail_lines = tail_lines[1:]  # started mid-line
    if room > 20:
        tail = _fit_lines(tail_lines, room - 13, from_end=True)
        if tail:
            parts.append("Last lines:\n" + tail)
    return clip_middle("\n".join(parts), budget)


def _header_lines(tool: Tool, command: str | None, found: Found, budget: int) -> list[str]:
    lines = [f"Tool: {tool}"]
    if command:
        lines.append(f"Command: {one_line(command, 200)}")
    if found.failing_tests:
        lines.append(_tests_line(list(found.failing_tests), max(budget // 4, 60)))
    if found.error:
        lines.append(f"First error: {found.error.render()}")
    counts = [(n, word) for n, word in ((found.passed, "passed"), (found.failed, "failed"))]
    known = [f"{n} {word}" for n, word in counts if n is not None]
    if known:
        lines.append("Counts: " + ", ".join(known))
    if found.summary:
        lines.append(f"Summary: {found.summary}")
    return lines


def _tests_line(tests: list[str], limit: int) -> str:
    """`Failing tests (N): a, b, c` listing as many ids as fit in `limit` chars."""
    prefix = f"Failing tests ({len(tests)}{'+' if len(tests) >= MAX_TESTS else ''}): "
    shown: list[str] = []
    used = len(prefix)
    for test in tests:
        if used + len(test) + 2 > limit and shown:
            break
        shown.append(clip_middle(test, limit - len(prefix)))
        used += len(shown[-1]) + 2
    more = len(tests) - len(shown)
    return prefix + ", ".join(shown) + (f", … (+{more} more)" if more else "")


def _fit_lines(lines: list[str], room: int, *, from_end: bool) -> str:
    """As many clipped, non-blank-run lines as fit in `room` chars, from the start or end."""
    kept: list[str] = []
    used = 0
    ordered = reversed(lines) if from_end else iter(lines)
    previous_blank = True
    for raw in ordered:
        line = clip_middle(raw.rstrip(), LINE_CLIP)
        if not line and previous_blank:
            continue  # no runs of blank lines, none at the edges
        if not kept and len(line) + 1 > room:
            line = clip_middle(line, room - 1)  # one long line: show what fits of it
        if used + len(line) + 1 > room:
            break
        kept.append(line)
        used += len(line) + 1
        previous_blank = not line
    if from_end:
        kept.reverse()
    return "\n".join(kept).strip("\n")


# --- signature -----------------------------------------------------------------------------------

_TEST_FILE = re.compile(
    r"(?:^|[/\\])(?:tests?|__tests__|spec)[/\\]|(?:^|[/\\])test_[^/\\]*$|_test\.\w+$|"
    r"\.(?:test|spec)\.[cm]?[jt]sx?$|_tests?\.py$"
)


def _is_test_file(path: str) -> bool:
    return bool(_TEST_FILE.search(path))


_HEX = "[0-9a-fA-F]"
_VOLATILE: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (rf"\b{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}\b", "<uuid>"),
        (r"\b0x[0-9a-fA-F]+\b", "0x?"),
        (r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?", "<ts>"),
        (r"\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b", "<time>"),
        (r"\b\d+(?:\.\d+)? ?(?:ms|s|sec|secs|seconds|µs|us|ns)\b", "<dur>"),
        (r"\b(pid|PID|process|thread)([ =:#]+)\d+", r"\1\2<n>"),
        (r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{8,}\b", "<hex>"),
    )
)
_TEMP_PATH = re.compile(
    r"(?:/private)?/(?:tmp|var/folders|var/tmp)/[^\s'\"`:,;)\]]*|"
    r"[A-Za-z]:\\[^\s'\"`:]*?\\(?:Temp|tmp)\\[^\s'\"`:,;)\]]*"
)


def normalise(text: str) -> str:
    """Drop what changes between runs of one failure: temp dirs, addresses, times, ids."""
    for pattern, replacement in _VOLATILE:
        text = pattern.sub(replacement, text)
    return _TEMP_PATH.sub(_temp_name, text)


def _temp_name(match: re.Match[str]) -> str:
    # Keep the file name, without the counters pytest and mkdtemp put in names.
    name = re.split(r"[/\\]", match.group(0).rstrip("/\\"))[-1]
    return "<tmp>/" + re.sub(r"\d+", "N", name)


def _signature(tool: Tool, found: Found, text: str) -> str:
    essentials: list[object] = [tool, sorted(normalise(t) for t in found.failing_tests)]
    error = found.error
    if error:
        file = re.split(r"[/\\]", error.file)[-1] if error.file else None
        keep_line = error.assertion or bool(error.file and _is_test_file(error.file))
        place = f"{file}:{error.line}" if file and error.line and keep_line else file
        essentials += [error.kind, normalise(error.message)[:200], place]
    elif not found.failing_tests:
        last = [line.strip() for line in text[-4000:].splitlines() if line.strip()][-5:]
        essentials.append([normalise(clip_middle(line, 200)) for line in last])
    return hashlib.sha256(orjson.dumps(essentials)).hexdigest()[:16]
