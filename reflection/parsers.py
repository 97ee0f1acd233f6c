"""Per-tool output parsers: what a failed command printed, read as findings.

`parse(text, command)` names the tool that printed the output (pytest, unittest, a bare
Python traceback, mypy, ruff, tsc, jest, vitest, go test, cargo test, or anything else)
and returns what its parser found: the failing tests, the first error with its file:line,
the pass/fail counts, the runner's summary and the error block worth showing.
`reflection.digest` renders that within a budget and hashes it into a signature.

Every pattern is anchored or linear, and every value is clipped as it is found.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from reflection.text import one_line

Tool = Literal[
    "pytest", "unittest", "traceback", "mypy", "ruff", "tsc",
    "jest", "vitest", "go", "cargo", "generic",
]  # fmt: skip

_DETECT_CHARS = 200_000  # head and tail slices searched for a tool's markers
LINE_CLIP = 400  # longest single line shown in the digest
_VALUE_CLIP = 300  # longest test id, error message or summary kept
MAX_TESTS = 500  # failing test ids kept
_BLOCK_CHARS = 20_000  # raw error block sliced before it is fitted to the budget
_MAX_LISTED = 40  # error lines listed for linters and typecheckers


def parse(text: str, command: str | None) -> tuple[Tool, Found]:
    """The tool that printed `text`, and what its parser found (with a fallback first error)."""
    tool = detect_tool(text, command)
    found = _PARSERS[tool](text)
    if found.error is None:
        found.error = _fallback_error(text)
    return tool, found


# --- what the parsers find -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Error:
    """The first failure: where it happened, its kind and its message."""

    kind: str  # exception type or error code ("AssertionError", "error[arg-type]", "panic")
    message: str
    file: str | None = None
    line: int | None = None
    assertion: bool = False  # a failed check in a test: its line identifies the failure

    def render(self) -> str:
        where = f"{self.file}:{self.line}" if self.file and self.line else self.file or ""
        what = f"{self.kind}: {self.message}" if self.kind and self.message else self.kind
        what = what or self.message
        return one_line(f"{where}: {what}" if where else what, _VALUE_CLIP * 2)


@dataclass
class Found:
    """Everything one parser extracted from the output."""

    failing_tests: dict[str, None] = field(default_factory=dict)  # ordered set
    error: _Error | None = None
    passed: int | None = None
    failed: int | None = None
    summary: str | None = None  # the runner's own summary line(s)
    block: str = ""  # the error block worth showing
    block_end: int = 0  # offset in the scanned text where the block ends

    def add_test(self, name: str) -> None:
        name = one_line(name.strip(), _VALUE_CLIP)
        if name and len(self.failing_tests) < MAX_TESTS:
            self.failing_tests.setdefault(name, None)

    def set_block(self, text: str, start: int, end: int) -> None:
        self.block, self.block_end = text[start:end].strip("\n"), end


# --- detecting -----------------------------------------------------------------------------------

_HINTS: tuple[tuple[str, Tool], ...] = (
    (r"\bpytest\b|\bpy\.test\b", "pytest"),
    (r"\bunittest\b", "unittest"),
    (r"\bmypy\b", "mypy"),
    (r"\bruff\b", "ruff"),
    (r"\btsc\b", "tsc"),
    (r"\bvitest\b", "vitest"),
    (r"\bjest\b", "jest"),
    (r"\bgo\s+(?:test|vet|build)\b", "go"),
    (r"\bcargo\b", "cargo"),
)
_COMMAND_HINTS = tuple((re.compile(pattern), tool) for pattern, tool in _HINTS)

# Checked in order: the more distinctive formats first (pytest output may hold tracebacks).
_MARKER_PATTERNS: tuple[tuple[str, Tool], ...] = (
        (r"^test result: (?:ok|FAILED)\. |^thread '[^'\n]*'(?: \(\d+\))? panicked at |"
         r"^error\[E\d{4}\]: ", "cargo"),
        (r"^[ \t]*--- FAIL: |^(?:FAIL|ok)[ \t]+\S+[ \t]+(?:\d[\d.]*s|\[build failed\]|\(cached\))|"
         r"^=== RUN ", "go"),
        (r"^=+ (?:test session starts|FAILURES|ERRORS|short test summary info) =+$|"
         r"^(?:FAILED|ERROR) \S+::|^_+ ERROR collecting ", "pytest"),
        (r"^Ran \d+ tests? in |^(?:FAIL|ERROR): \w+ \(", "unittest"),
        (r"^[ \t]*Test Files[ \t]+\d|^[ \t]*FAIL[ \t]+\S+ > ", "vitest"),
        (r"^Test Suites: |^Tests:[ \t]+\d|^[ \t]*● .+ › ", "jest"),
        (r"\(\d+,\d+\): error TS\d+: |:\d+:\d+ - error TS\d+: ", "tsc"),
        (r"^[^\s:][^:\n]*:\d+: error: |^Found \d+ errors? in \d+ files? \(checked", "mypy"),
        (r"^[^\s:][^:\n]*:\d+:\d+: [A-Z]{1,4}\d{1,4} |^[A-Z]{1,4}\d{1,4} [^\n]*\n[ \t]*--> |"
         r"^Would reformat: ", "ruff"),
        (r"^Traceback \(most recent call last\):", "traceback"),
)  # fmt: skip
_MARKERS = tuple((re.compile(pattern, re.M), tool) for pattern, tool in _MARKER_PATTERNS)


def detect_tool(text: str, command: str | None) -> Tool:
    """The tool named by the command when it names exactly one, else the output's format."""
    sample = text
    if len(text) > 2 * _DETECT_CHARS:
        sample = text[:_DETECT_CHARS] + text[-_DETECT_CHARS:]
    by_output = next((tool for marker, tool in _MARKERS if marker.search(sample)), None)
    hinted = [tool for hint, tool in _COMMAND_HINTS if command and hint.search(command)]
    if len(hinted) == 1:
        return hinted[0]
    if by_output in hinted or not hinted:
        return by_output or "generic"
    return hinted[0]


# --- small text helpers --------------------------------------------------------------------------




def _lines_until(text: str, start: int, stop: re.Pattern[str], limit: int = _BLOCK_CHARS) -> int:
    """End offset of the block that starts at `start`: the next `stop` line after its first."""
    first_end = text.find("\n", start)
    if first_end < 0:
        return len(text)
    match = stop.search(text, first_end + 1, min(len(text), start + limit))
    return match.start() if match else min(len(text), start + limit)


def _back_to(text: str, prefix: str, pos: int, reach: int = 4000) -> int:
    """Start of the nearest line within `reach` before `pos` that starts with `prefix`."""
    low = max(0, pos - reach)
    at = text.rfind("\n" + prefix, low, pos)
    if at >= 0:
        return at + 1
    if low == 0 and text.startswith(prefix):
        return 0
    return text.rfind("\n", 0, pos) + 1


def _first(*matches: re.Match[str] | None) -> re.Match[str] | None:
    """The earliest of several optional matches."""
    found = [m for m in matches if m is not None]
    return min(found, key=lambda m: m.start()) if found else None


# --- Python tracebacks ---------------------------------------------------------------------------

_TB_START = re.compile(r"^[ \t]*Traceback \(most recent call last\):[ \t]*$", re.M)
_TB_FRAME = re.compile(r'^[ \t]*File "([^"\n]+)", line (\d+)(?:, in ([^\n]*))?$')
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*)(?::[ \t]?(.*))?$")
_LIBRARY_PATH = re.compile(
    r"site-packages|dist-packages|[/\\]lib[/\\]python\d|[/\\]Lib[/\\]|^<|[/\\]_pytest[/\\]"
)


def _traceback_error(block: str) -> _Error | None:
    """The error of the last traceback in `block`."""
    starts = list(_TB_START.finditer(block))
    return _scan_traceback(block, starts[-1].start())[0] if starts else None


def _scan_traceback(text: str, start: int) -> tuple[_Error | None, int]:
    """Parse the traceback whose header line is at `start`: its error and where it ends."""
    frames: list[tuple[str, int]] = []
    limit = min(len(text), start + _BLOCK_CHARS)
    pos = text.find("\n", start, limit) + 1  # skip the header line
    while 0 < pos < limit:
        end = text.find("\n", pos, limit)
        end = limit if end < 0 else end
        line = text[pos:end]
        pos = end + 1
        frame = _TB_FRAME.match(line)
        if frame:
            frames.append((frame.group(1), int(frame.group(2))))
        elif line and not line[0].isspace():
            exc = _EXCEPTION.match(line.strip())
            error = _exception_error(exc.group(1), exc.group(2) or "", frames) if exc else None
            return error, end
    return None, limit


def _exception_error(kind: str, message: str, frames: list[tuple[str, int]]) -> _Error:
    """The exception at the innermost frame of user code (not the stdlib or site-packages)."""
    user = [f for f in frames if not _LIBRARY_PATH.search(f[0])] or frames
    path, line = user[-1] if user else (None, None)
    return _Error(
        kind=kind,
        message=one_line(message, _VALUE_CLIP),
        file=path,
        line=line,
        assertion=kind.rsplit(".", 1)[-1] == "AssertionError",
    )


def _parse_traceback(text: str) -> Found:
    """A bare traceback: the last one printed is what ended the program."""
    found = Found()
    starts = list(_TB_START.finditer(text))
    if starts:
        found.error, end = _scan_traceback(text, starts[-1].start())
        found.set_block(text, starts[-1].start(), end)
    return found


# --- pytest --------------------------------------------------------------------------------------

_PYTEST_SHORT = re.compile(r"^(FAILED|ERROR) ([^\n]+)$", re.M)
_PYTEST_VERBOSE = re.compile(r"^(\S+::\S+) (?:FAILED|ERROR)\b", re.M)
_PYTEST_SUMMARY = re.compile(
    r"^=*[ \t]?((?:\d+ [a-z]+, )*\d+ [a-z]+ in \d[\d.]*s\b[^\n=]*|no tests ran in [^\n=]*)"
    r"[ \t]?=*[ \t]*$",
    re.M,
)
_PYTEST_SECTIONS = re.compile(r"^=+ (?:FAILURES|ERRORS) =+$", re.M)
_PYTEST_HEADER = re.compile(r"^_{2,} (.+?) _{2,}$", re.M)
_PYTEST_SECTION_END = re.compile(r"^(?:_{2,} \S|=+ )", re.M)
_PY_LOCATION = re.compile(r"^([^\s:][^:\n]*\.py):(\d+):(?: (.*))?$")
_EXC_NAME = re.compile(r"^[A-Za-z_][\w.]*$")
_EXC_MESSAGE = re.compile(
    r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failed|Failure)|Failed)"
    r"(?::[ \t]?(.*))?$"
)


def _parse_pytest(text: str) -> Found:
    found = Found()
    for match in _PYTEST_SHORT.finditer(text):
        found.add_test(match.group(2).split(" - ", 1)[0])
    if not found.failing_tests:
        for match in _PYTEST_VERBOSE.finditer(text):
            found.add_test(match.group(1))
    _pytest_counts(text, found)
    section = _PYTEST_SECTIONS.search(text)
    header = _PYTEST_HEADER.search(text, section.end()) if section else None
    if header:
        end = _lines_until(text, header.start(), _PYTEST_SECTION_END)
        found.set_block(text, header.start(), end)
        found.error = _pytest_error(found.block.splitlines()[1:])
        if header.group(1).startswith("ERROR collecting "):
            found.add_test(header.group(1).removeprefix("ERROR collecting "))
    if found.error is None and found.failing_tests:
        found.error = _pytest_summary_error(text)
    return found


def _pytest_counts(text: str, found: Found) -> None:
    summaries = list(_PYTEST_SUMMARY.finditer(text))
    if not summaries:
        return
    line = summaries[-1].group(1).strip()
    counts = {word: int(n) for n, word in re.findall(r"(\d+) ([a-z]+)", line)}
    found.summary = line
    found.passed = counts.get("passed", 0)
    found.failed = counts.get("failed", 0) + counts.get("error", 0) + counts.get("errors", 0)


def _pytest_error(lines: list[str]) -> _Error | None:
    """First error of one pytest failure section: its `E` lines and its location lines."""
    e_lines = [line[1:].strip() for line in lines if line.startswith("E ")]
    first_e = next((i for i, line in enumerate(lines) if line.startswith("E ")), len(lines))
    locations = [(i, m) for i, line in enumerate(lines) if (m := _PY_LOCATION.match(line))]
    raised = [m for _, m in locations if m.group(3) and _EXC_NAME.match(m.group(3))]
    before = [m for i, m in locations if i < first_e]
    where = raised[-1] if raised else (before[-1] if before else None)
    if not e_lines and where is None:
        return None
    kind = where.group(3) if where and where in raised else ""
    message = e_lines[0] if e_lines else ""
    split = _EXC_MESSAGE.match(message)
    if split:
        kind, message = split.group(1), split.group(2) or ""
    elif message.startswith("assert"):
        kind = kind or "AssertionError"
    return _Error(
        kind=kind,
        message=one_line(message, _VALUE_CLIP),
        file=where.group(1) if where else None,
        line=int(where.group(2)) if where else None,
        assertion=kind.rsplit(".", 1)[-1] == "AssertionError",
    )


def _pytest_summary_error(text: str) -> _Error | None:
    """The first error from the short summary, when no failure section was printed."""
    match = _PYTEST_SHORT.search(text)
    if not match or " - " not in match.group(2):
        return None
    test_id, message = match.group(2).split(" - ", 1)
    split = _EXC_MESSAGE.match(message)
    kind, message = (split.group(1), split.group(2) or "") if split else ("", message)
    if not kind and message.startswith("assert"):
        kind = "AssertionError"
    return _Error(
        kind=kind,
        message=one_line(message, _VALUE_CLIP),
        file=test_id.split("::", 1)[0],
        assertion=kind == "AssertionError",
    )


_PYTEST_PHASE = re.compile(r"^ERROR at (?:setup|teardown) of ")


def error_in_pytest_output(text: str, test_id: str) -> _Error | None:
    """The first error of one failing pytest test, not of whichever failed first.

    Its section under FAILURES or ERRORS (headed `test_name`, `Class.test_name[param]` or
    `ERROR at setup of test_name`), else its short-summary line (`FAILED id - message`).
    """
    head = ".".join(test_id.split("::")[1:])  # pytest's head line: Class.test_name[param]
    section = _PYTEST_SECTIONS.search(text)
    for header in _PYTEST_HEADER.finditer(text, section.end()) if section and head else ():
        if _PYTEST_PHASE.sub("", header.group(1)) == head:
            end = _lines_until(text, header.start(), _PYTEST_SECTION_END)
            error = _pytest_error(text[header.start() : end].strip("\n").splitlines()[1:])
            if error is not None:
                return error
    line = re.search(rf"^(?:FAILED|ERROR) {re.escape(test_id)} - [^\n]*$", text, re.M)
    return _pytest_summary_error(line.group(0)) if line else None


# --- unittest ------------------------------------------------------------------------------------

_UT_HEADER = re.compile(r"^(?:FAIL|ERROR|UNEXPECTED SUCCESS): (\S+) \(([^)\n]*)\)", re.M)
_UT_SEPARATOR = re.compile(r"^(?:={20,}|-{20,})$", re.M)
_UT_RAN = re.compile(r"^Ran (\d+) tests? in ", re.M)
_UT_RESULT = re.compile(r"^(FAILED|OK)(?: \(([^)\n]*)\))?[ \t]*$", re.M)


def _parse_unittest(text: str) -> Found:
    found = Found()
    headers = list(_UT_HEADER.finditer(text))
    for header in headers:
        found.add_test(_unittest_id(header.group(1), header.group(2)))
    if headers:
        start = headers[0].start()
        body = _UT_SEPARATOR.search(text, start)  # the dashes under the header
        end = _lines_until(text, body.end() if body else start, _UT_SEPARATOR)
        found.set_block(text, start, end)
        found.error = _traceback_error(found.block)
    _unittest_counts(text, found)
    return found


def _unittest_id(name: str, where: str) -> str:
    if where.startswith("unittest.loader._Failed"):
        return name  # a module that failed to import: the name is the module
    return where if where.endswith(f".{name}") else f"{where}.{name}"


def _unittest_counts(text: str, found: Found) -> None:
    ran = list(_UT_RAN.finditer(text))
    result = list(_UT_RESULT.finditer(text))
    if not ran or not result:
        return
    total = int(ran[-1].group(1))
    details = dict(re.findall(r"([a-z ]+)=(\d+)", result[-1].group(2) or ""))
    count = {key.strip(): int(value) for key, value in details.items()}
    failed = sum(count.get(key, 0) for key in ("failures", "errors", "unexpected successes"))
    not_run = sum(count.get(key, 0) for key in ("skipped", "expected failures"))
    found.failed, found.passed = failed, max(total - failed - not_run, 0)
    found.summary = f"Ran {total} test{'' if total == 1 else 's'}; {result[-1].group(0).strip()}"


# --- mypy, ruff, tsc: one line per error ---------------------------------------------------------

_MYPY_ERROR = re.compile(r"^([^\s:][^:\n]*):(\d+):(?:\d+:)? error: ([^\n]*)$", re.M)
_MYPY_CODE = re.compile(r"\[([a-z][a-z0-9-]*)\]$")
_MYPY_SUMMARY = re.compile(r"^(?:Found \d+ errors? in \d+ files?|Success: no issues)[^\n]*$", re.M)


def _parse_mypy(text: str) -> Found:
    errors: list[tuple[re.Match[str], _Error]] = []
    for match in _MYPY_ERROR.finditer(text):
        message = match.group(3)
        code = _MYPY_CODE.search(message)
        kind = f"error[{code.group(1)}]" if code else "error"
        message = message[: code.start()].rstrip() if code else message
        error = _Error(kind, one_line(message, _VALUE_CLIP), match.group(1), int(match.group(2)))
        errors.append((match, error))
    return _listed(text, errors, _MYPY_SUMMARY)


_RUFF_CONCISE = re.compile(
    r"^([^\s:][^:\n]*):(\d+):(\d+): ([A-Z]{1,4}\d{1,4}|SyntaxError|invalid-syntax):? "
    r"(?:\[\*\] )?([^\n]*)$",
    re.M,
)
_RUFF_FULL = re.compile(
    r"^([A-Z]{1,4}\d{1,4}|invalid-syntax):? (?:\[\*\] )?([^\n]*)\n"
    r"[ \t]*--> ([^\n]+?):(\d+):\d+[ \t]*$",
    re.M,
)
_RUFF_FORMAT = re.compile(r"^Would reformat: ([^\n]+)$", re.M)
_RUFF_SUMMARY = re.compile(r"^(?:Found \d+ errors?\.|\d+ files? would be reformatted)[^\n]*$", re.M)


def _parse_ruff(text: str) -> Found:
    errors = [
        (m, _Error(m.group(4), one_line(m.group(5), _VALUE_CLIP), m.group(1), int(m.group(2))))
        for m in _RUFF_CONCISE.finditer(text)
    ]
    errors += [
        (m, _Error(m.group(1), one_line(m.group(2), _VALUE_CLIP), m.group(3), int(m.group(4))))
        for m in _RUFF_FULL.finditer(text)
    ]
    errors += [
        (m, _Error("format", "file would be reformatted", m.group(1)))
        for m in _RUFF_FORMAT.finditer(text)
    ]
    errors.sort(key=lambda pair: pair[0].start())
    return _listed(text, errors, _RUFF_SUMMARY)


_TSC_PLAIN = re.compile(r"^([^\s(][^(\n]*)\((\d+),(\d+)\): error (TS\d+): ([^\n]*)$", re.M)
_TSC_PRETTY = re.compile(r"^([^\s:][^:\n]*):(\d+):(\d+) - error (TS\d+): ([^\n]*)$", re.M)
_TSC_SUMMARY = re.compile(r"^Found \d+ errors?\b[^\n]*$", re.M)


def _parse_tsc(text: str) -> Found:
    matches = list(_TSC_PLAIN.finditer(text)) + list(_TSC_PRETTY.finditer(text))
    matches.sort(key=lambda m: m.start())
    errors = [
        (m, _Error(m.group(4), one_line(m.group(5), _VALUE_CLIP), m.group(1), int(m.group(2))))
        for m in matches
    ]
    return _listed(text, errors, _TSC_SUMMARY)


def _listed(
    text: str, errors: list[tuple[re.Match[str], _Error]], summary: re.Pattern[str]
) -> Found:
    """Findings of a checker that prints one error per line: the list is the block."""
    found = Found()
    if errors:
        found.error = errors[0][1]
        found.block = "\n".join(error.render() for _, error in errors[:_MAX_LISTED])
        if len(errors) > _MAX_LISTED:
            found.block += f"\n… and {len(errors) - _MAX_LISTED} more"
        found.block_end = errors[min(len(errors), _MAX_LISTED) - 1][0].end()
    summaries = list(summary.finditer(text))
    if summaries:
        found.summary = one_line(summaries[-1].group(0), _VALUE_CLIP)
    return found


# --- jest and vitest -----------------------------------------------------------------------------

_JEST_BULLET = re.compile(r"^[ \t]*● ([^\n]+)$", re.M)
_JEST_CROSS = re.compile(r"^[ \t]*[✕×] ([^\n]+?)(?: \(\d[\d.]* ?m?s\))?$", re.M)
_JEST_SUITE = re.compile(r"^[ \t]*FAIL[ \t]+(\S+)", re.M)
_JEST_COUNTS = re.compile(r"^Tests:[ \t]+([^\n]+)$", re.M)
_JEST_BLOCK_END = re.compile(r"^(?:[ \t]*● |[ \t]*(?:PASS|FAIL) |Test Suites: |Tests: )", re.M)
_JS_FRAME = re.compile(r"^[ \t]*at (?:[^\n(]*\()?([^\s()]+?):(\d+):\d+\)?[ \t]*$", re.M)
_JS_ERROR = re.compile(r"^[ \t]*([A-Z]\w*(?:Error|Exception)|Error): ([^\n]*)$")
_EXPECT_VALUES = re.compile(r"^[ \t]*(Expected|Received)(?: [\w ]+)?: ([^\n]*)$", re.M)


def _parse_jest(text: str) -> Found:
    found = Found()
    bullets = [m for m in _JEST_BULLET.finditer(text) if m.group(1) != "Test suite failed to run"]
    for match in bullets or list(_JEST_CROSS.finditer(text)):
        found.add_test(match.group(1))
    if not found.failing_tests:
        for match in _JEST_SUITE.finditer(text):
            found.add_test(match.group(1))
    first = _JEST_BULLET.search(text)
    if first:
        end = _lines_until(text, first.start(), _JEST_BLOCK_END)
        found.set_block(text, first.start(), end)
        found.error = _js_error(found.block.splitlines()[1:], _JS_FRAME)
    counts = list(_JEST_COUNTS.finditer(text))
    if counts:
        _js_counts(counts[-1].group(1), found)
    return found


_VITEST_FAIL = re.compile(r"^[ \t]*FAIL[ \t]+([^\n]+? > [^\n]+?)[ \t]*$", re.M)
_VITEST_SUITE_FAIL = re.compile(r"^[ \t]*FAIL[ \t]+(\S+)[ \t]+\[[^\n]*\][ \t]*$", re.M)
_VITEST_CROSS = re.compile(r"^[ \t]*× ([^\n]+?)(?: \d+ ?ms)?[ \t]*$", re.M)
_VITEST_COUNTS = re.compile(r"^[ \t]*Tests[ \t]+(\d[^\n]*)$", re.M)
_VITEST_FRAME = re.compile(r"^[ \t]*❯ (?:\S+ )?([^\s:]+):(\d+):\d+[ \t]*$", re.M)
_VITEST_BLOCK_END = re.compile(r"^(?:⎯|[ \t]*FAIL[ \t]|[ \t]*Test Files )", re.M)


def _parse_vitest(text: str) -> Found:
    found = Found()
    headers = list(_VITEST_FAIL.finditer(text))
    for match in headers or list(_VITEST_CROSS.finditer(text)):
        found.add_test(match.group(1))
    for match in _VITEST_SUITE_FAIL.finditer(text):
        found.add_test(match.group(1))
    first = _first(headers[0] if headers else None, _VITEST_SUITE_FAIL.search(text))
    if first:
        end = _lines_until(text, first.start(), _VITEST_BLOCK_END)
        found.set_block(text, first.start(), end)
        found.error = _js_error(found.block.splitlines()[1:], _VITEST_FRAME)
    counts = list(_VITEST_COUNTS.finditer(text))
    if counts:
        _js_counts(counts[-1].group(1), found)
    return found


def _js_error(lines: list[str], frame: re.Pattern[str]) -> _Error | None:
    """Message, expected/received values and first project frame of a jest/vitest block."""
    message = next((line.strip() for line in lines if line.strip()), "")
    if not message:
        return None
    body = "\n".join(lines)
    thrown = _JS_ERROR.match(message)
    kind, message = (thrown.group(1), thrown.group(2)) if thrown else ("", message)
    values = dict(_EXPECT_VALUES.findall(body))
    if values:
        message += " (" + ", ".join(f"{k}: {v.strip()}" for k, v in values.items()) + ")"
    frames = [m for m in frame.finditer(body) if "node_modules" not in m.group(1)]
    where = frames[0] if frames else None
    return _Error(
        kind=kind,
        message=one_line(message, _VALUE_CLIP),
        file=where.group(1) if where else None,
        line=int(where.group(2)) if where else None,
        assertion=not thrown or kind == "AssertionError",
    )


def _js_counts(line: str, found: Found) -> None:
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (failed|passed)", line)}
    found.summary = one_line(line, _VALUE_CLIP)
    found.passed, found.failed = counts.get("passed", 0), counts.get("failed", 0)


# --- go test -------------------------------------------------------------------------------------

_GO_RESULT = re.compile(r"^([ \t]*)--- (FAIL|PASS): (\S+) \(", re.M)
_GO_PACKAGE = re.compile(
    r"^(FAIL|ok)[ \t]+(\S+)[ \t]+(?:\d[\d.]*s|\[(?:build|setup) failed\]|\(cached\))", re.M
)
_GO_LOG = re.compile(r"^[ \t]+([\w./-]+\.go):(\d+): ([^\n]*)$", re.M)
_GO_PANIC = re.compile(r"^panic: ([^\n]*?)(?: \[recovered\])?$", re.M)
_GO_FRAME = re.compile(r"^\t([^\s]+\.go):(\d+)(?: \+0x[0-9a-f]+)?$", re.M)
_GO_BUILD = re.compile(r"^(?:\./)?([^\s:]+\.go):(\d+):(\d+): ([^\n]*)$", re.M)
_GO_RUNTIME = re.compile(r"/src/(?:runtime|testing|reflect|sync)/|/pkg/mod/|/libexec/src/")
_GO_BLOCK_END = re.compile(r"^(?:=== RUN|--- PASS|FAIL|ok|PASS)\b", re.M)


def _parse_go(text: str) -> Found:
    found = Found()
    results = list(_GO_RESULT.finditer(text))
    failures = [m for m in results if m.group(2) == "FAIL"]
    for match in failures:
        found.add_test(match.group(3))
    packages = list(_GO_PACKAGE.finditer(text))
    if not failures:
        for match in packages:
            if match.group(1) == "FAIL":
                found.add_test(match.group(2))
    top = [m for m in results if not m.group(1)]
    if top:
        found.failed = sum(m.group(2) == "FAIL" for m in top)
        found.passed = sum(m.group(2) == "PASS" for m in top) if "=== RUN" in text else None
    if packages:
        statuses = "; ".join(f"{m.group(1)} {m.group(2)}" for m in packages)
        found.summary = one_line(statuses, _VALUE_CLIP)
    _go_first_error(text, failures[0] if failures else None, found)
    return found


def _go_first_error(text: str, failure: re.Match[str] | None, found: Found) -> None:
    """The earliest of: a build error, the first failing test's log line, a panic."""
    build = _GO_BUILD.search(text)
    panic = _GO_PANIC.search(text)
    log_line = _go_failure_log(text, failure) if failure else None
    first = _first(build, panic, log_line)
    if first is None:
        return
    if first is build:
        message = one_line(first.group(4), _VALUE_CLIP)
        found.error = _Error("build", message, first.group(1), int(first.group(2)))
        start = _back_to(text, "# ", first.start())
    elif first is panic:
        frames = _GO_FRAME.finditer(text, first.end(), first.end() + _BLOCK_CHARS)
        where = next((m for m in frames if not _GO_RUNTIME.search(m.group(1))), None)
        found.error = _Error(
            kind="panic",
            message=one_line(first.group(1), _VALUE_CLIP),
            file=where.group(1) if where else None,
            line=int(where.group(2)) if where else None,
        )
        start = first.start()
    else:
        message = one_line(first.group(3), _VALUE_CLIP)
        found.error = _Error("", message, first.group(1), int(first.group(2)), assertion=True)
        start = min(first.start(), failure.start()) if failure else first.start()
    found.set_block(text, start, _lines_until(text, start, _GO_BLOCK_END))


def _go_failure_log(text: str, failure: re.Match[str]) -> re.Match[str] | None:
    """The first log line of a failing test: under `=== RUN name` (-v) or under its FAIL."""
    run = text.rfind(f"=== RUN   {failure.group(3)}\n", 0, failure.start())
    if run >= 0:
        return _GO_LOG.search(text, run, failure.start())
    end = _lines_until(text, failure.start(), re.compile(r"^\S", re.M))
    return _GO_LOG.search(text, failure.end(), end)


# --- cargo test ----------------------------------------------------------------------------------

_CARGO_FAILED = re.compile(r"^test (\S+) \.\.\. FAILED$", re.M)
_CARGO_RESULT = re.compile(
    r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed;[^\n]*$", re.M
)
_CARGO_PANIC = re.compile(
    r"^thread '([^'\n]*)'(?: \(\d+\))? panicked at (?:'([^\n]*)', )?([^\s:]+):(\d+):\d+:?$", re.M
)
_RUST_ERROR = re.compile(r"^(error(?:\[E\d+\])?): ([^\n]*)\n[ \t]*--> ([^\n:]+):(\d+):\d+", re.M)
_CARGO_MESSAGE_END = re.compile(r"^(?:[ \t]*$|note: |stack backtrace:)", re.M)
_BLANK_THEN_TEXT = re.compile(r"^\n(?=\S)", re.M)  # a blank line, then unindented text
_CARGO_BLOCK_END = re.compile(r"^(?:---- |failures:$|test result: )", re.M)


def _parse_cargo(text: str) -> Found:
    found = Found()
    for match in _CARGO_FAILED.finditer(text):
        found.add_test(match.group(1))
    results = list(_CARGO_RESULT.finditer(text))
    if results:
        found.passed = sum(int(m.group(1)) for m in results)
        found.failed = sum(int(m.group(2)) for m in results)
        found.summary = one_line(results[-1].group(0), _VALUE_CLIP)
    panic, compile_error = _CARGO_PANIC.search(text), _RUST_ERROR.search(text)
    first = _first(panic, compile_error)
    if first is compile_error and first is not None:
        message = one_line(first.group(2), _VALUE_CLIP)
        found.error = _Error(first.group(1), message, first.group(3), int(first.group(4)))
        found.set_block(text, first.start(), _lines_until(text, first.start(), _BLANK_THEN_TEXT))
    elif first is not None:
        message = first.group(2) or _cargo_panic_message(text, first.end())
        found.error = _Error(
            kind="panic",
            message=one_line(message, _VALUE_CLIP),
            file=first.group(3),
            line=int(first.group(4)),
            assertion=message.startswith("assert"),
        )
        start = _back_to(text, "---- ", first.start())
        found.set_block(text, start, _lines_until(text, start, _CARGO_BLOCK_END))
    return found


def _cargo_panic_message(text: str, start: int) -> str:
    """The panic message: the lines after the `panicked at` line, up to a note or a blank."""
    end = _CARGO_MESSAGE_END.search(text, start + 1, start + 4000)
    return text[start : end.start() if end else start + 4000].strip()


# --- generic -------------------------------------------------------------------------------------

_GENERIC_ERROR = re.compile(
    r"[Ee]rror|ERROR|FAIL|[Ee]xception|[Ff]atal|panic|command not found|[Pp]ermission denied|"
    r"No such file or directory|: not found"
)
_GENERIC_PLACE = re.compile(r"([\w./\\-]+\.\w+):(\d+)")


def _parse_generic(text: str) -> Found:
    found = Found()
    found.error = _fallback_error(text)
    return found


def _fallback_error(text: str) -> _Error | None:
    """A traceback's exception if there is one, else the first line that reads like an error."""
    if _TB_START.search(text):
        return _parse_traceback(text).error
    match = _GENERIC_ERROR.search(text)
    if not match:
        return None
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    line = text[start : end if end >= 0 else len(text)].strip()
    place = _GENERIC_PLACE.search(line[:LINE_CLIP])
    return _Error(
        kind="",
        message=one_line(line, _VALUE_CLIP),
        file=place.group(1) if place else None,
        line=int(place.group(2)) if place else None,
    )


_PARSERS: dict[Tool, Callable[[str], Found]] = {
    "pytest": _parse_pytest,
    "unittest": _parse_unittest,
    "traceback": _parse_traceback,
    "mypy": _parse_mypy,
    "ruff": _parse_ruff,
    "tsc": _parse_tsc,
    "jest": _parse_jest,
    "vitest": _parse_vitest,
    "go": _parse_go,
    "cargo": _parse_cargo,
    "generic": _parse_generic,
}
