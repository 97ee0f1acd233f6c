"""Verification: run typecheck and test commands and turn their outcome into a Verdict.

Each command runs through `/bin/sh -c` in its own session (so its own process group)
under a timeout. On a timeout, on cancellation, and after a normal exit alike, the
whole group is sent SIGTERM and then SIGKILL, so a hung test runner cannot leave
servers or grandchildren behind. Output (stdout and stderr interleaved) is streamed
into a bounded buffer: the head and the tail of a huge log are kept, and of the middle
only the lines around the first failures (a traceback, an assertion, pytest's `E` and
`FAILED` lines), so a failure printed halfway through a megabyte of noise still reaches
the digest. Memory stays bounded whatever the command prints.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, Process
from pydantic import BaseModel

from orchestrator.checks.settings import DEFAULT_OUTPUT_CAP, CheckSettings, Kind
from orchestrator.processes import (
    MARK_ENV,
    announce,
    escaped_pids,
    kill_sessions,
    live_sessions,
    process_mark,
    starting_command,
)
from reflection.digest import Digest, estimate_tokens, make_digest
from reflection.redact import redact
from reflection.schema import FailureType

logger = logging.getLogger("goldenloop.verify")
Wrap = Callable[[list[str]], list[str]]  # a command line to the one that runs it (a sandbox)

TERM_GRACE_S = 2.0  # time between SIGTERM and SIGKILL to the group
LINGER_S = 1.0  # after the shell exits, how long background children may keep the pipe
DRAIN_AFTER_KILL_S = 1.0  # reading what is left in the pipe once the group is dead
CHUNK = 64 * 1024
NOT_FOUND_EXIT = 127  # POSIX shells: command not found
NOT_EXECUTABLE_EXIT = 126  # POSIX shells: found but not executable
LINES_BEFORE = 10  # lines kept before a failure line from the middle of the output
LINES_AFTER = 40  # lines kept after it; another failure line among them extends the run
LONGEST_LINE = 4096  # bytes; a longer line is clipped when kept, never scanned whole

# Lines that start a failure, in the shapes reflection.parsers reads: pytest's summary
# and explanation lines, tracebacks, exception and assertion lines, compiler errors.
_FAILURE_LINE = re.compile(
    rb"^(?:Traceback \(most recent call last\)|(?:FAILED|ERROR|FAIL)[ :]|E {3}|[ \t]*--- FAIL: "
    rb"|[ \t]*assert\b)|(?:Error|Exception)(?::|$)|\berror(?:\[E\d+\])?: |panicked at ",
    re.M,
)


class CommandResult(BaseModel):
    """What one verification command did."""

    command: str
    kind: Kind
    exit_code: int | None  # None: never started, or killed before it reported one
    output: str  # stdout and stderr interleaved, head and tail of a large output
    timed_out: bool = False
    duration_s: float = 0.0
    started: bool = True  # False: the shell itself could not be started

    @property
    def ok(self) -> bool:
        return self.started and not self.timed_out and self.exit_code == 0


class _FailureLines:
    """The lines around the first failures in the middle of a stream, within `budget` bytes.

    It is fed, in order, the bytes the capped buffer drops (with their offset in the
    stream), so it only ever scans and keeps what would otherwise be lost.
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.size = 0  # bytes kept
        self.pieces: list[tuple[int, int, bytearray]] = []  # (start, end offset, bytes kept)
        self._partial = b""  # the start of a line whose end has not been dropped yet
        self._overlong = False  # inside a line too long to scan: wait for its end
        self._before: deque[tuple[int, int, bytes]] = deque(maxlen=LINES_BEFORE)
        self._after = 0  # lines still to keep after the last failure line

    def feed(self, data: bytes, offset: int) -> None:
        if self.size >= self.budget:
            return  # full: the first failures are kept, later ones are not needed
        if self._overlong:
            cut = data.find(b"\n") + 1
            if not cut:
                return
            self._overlong = False
            data, offset = data[cut:], offset + cut
        start = offset - len(self._partial)
        text = self._partial + data
        end = text.rfind(b"\n") + 1
        self._partial = text[end:]
        if len(self._partial) > LONGEST_LINE:
            self._partial, self._overlong = b"", True
        if end:
            self._scan(text[:end], start)

    def _scan(self, text: bytes, at: int) -> None:
        """Keep the failure lines of `text` (whole lines from offset `at`) and their context."""
        pos = 0
        while pos < len(text) and self.size < self.budget:
            if self._after:
                pos = self._keep_line(text, pos, at)
                continue
            found = _FAILURE_LINE.search(text, pos)
            if found is None:
                break
            line_start = max(text.rfind(b"\n", pos, found.start()) + 1, pos)
            self._remember(text, pos, line_start, at)
            for before in self._before:
                self._keep(*before)
            self._before.clear()
            self._after = 1  # the failure line itself; it sets the count after it
            pos = line_start
        if not self._after:
            self._remember(text, pos, len(text), at)

    def _keep_line(self, text: bytes, pos: int, at: int) -> int:
        end = text.find(b"\n", pos) + 1 or len(text)
        line = text[pos:end]
        self._after = LINES_AFTER if _FAILURE_LINE.search(line) else self._after - 1
        self._keep(at + pos, at + end, line)
        return end

    def _remember(self, text: bytes, pos: int, end: int, at: int) -> None:
        """The last lines of `text[pos:end]`, as context for a failure line yet to come."""
        lines: list[tuple[int, int, bytes]] = []
        stop = end
        while stop > pos and len(lines) < LINES_BEFORE:
            begin = max(text.rfind(b"\n", pos, stop - 1) + 1, pos)
            lines.append((at + begin, at + stop, text[begin : min(stop, begin + LONGEST_LINE)]))
            stop = begin
        self._before.extend(reversed(lines))

    def _keep(self, start: int, end: int, line: bytes) -> None:
        room = min(self.budget - self.size, LONGEST_LINE)
        if len(line) > room:  # the clipped rest counts as omitted
            line, end = line[:room], start + room
        self.size += len(line)
        if self.pieces and self.pieces[-1][1] == start:
            self.pieces[-1] = (self.pieces[-1][0], end, self.pieces[-1][2] + line)
        else:
            self.pieces.append((start, end, bytearray(line)))


class _CappedOutput:
    """Keeps the first eighth and the last seven eighths of `cap` bytes of a stream.

    Of what falls between, the lines around the first failures are kept too (up to an
    eighth of `cap`); the tail gives up as many bytes, so at most `cap` bytes are shown.
    """

    def __init__(self, cap: int) -> None:
        self._head_cap = max(cap // 8, 0)
        self._tail_cap = max(cap - self._head_cap, 0)
        self._head = bytearray()
        self._tail = bytearray()
        self._failures = _FailureLines(self._head_cap)
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self._tail += chunk
        excess = len(self._tail) - self._tail_cap
        if excess > 0:
            self._failures.feed(bytes(self._tail[:excess]), self.total - len(self._tail))
            # bytearray drops a prefix cheaply, so the tail stays a moving window
            del self._tail[:excess]

    def text(self) -> str:
        omitted = self.total - len(self._head) - len(self._tail)
        if omitted <= 0:  # decode as one piece: the head may end inside a character
            return (self._head + self._tail).decode("utf-8", errors="replace")
        # Only whole lines on each side of a cut: what a cut leaves of `password=hunter2`
        # may be `word=hunter2`, which no redaction rule knows for a secret.
        tail = self._tail[self._failures.size :]
        shown, at = bytearray(self._head), len(self._head)
        for start, end, kept in [*self._failures.pieces, (self.total - len(tail), self.total, tail)]:
            if start > at:
                whole = shown.rfind(b"\n") + 1
                at -= len(shown) - whole
                del shown[whole:]
                first = kept.find(b"\n") + 1  # 0: the piece is all one line the cut went through
                if not first and end < self.total:
                    continue
                kept, start = (kept[first:], start + first) if first else (b"", end)
                shown += b"[... %d bytes omitted ...]\n" % (start - at)
            shown += kept
            at = end
        return shown.decode("utf-8", errors="replace")


def _command_env(env: Mapping[str, str] | None) -> dict[str, str]:
    merged = dict(os.environ if env is None else env)
    merged["PYTHONUNBUFFERED"] = "1"  # so a killed Python runner has flushed its output
    mark = process_mark.get()
    if mark is not None:  # the next run finds the command by it, should this run be killed
        merged[MARK_ENV] = mark
    return merged


def _signal_group(pgid: int, sig: signal.Signals) -> bool:
    """Signal a process group; False when nothing is left in it."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


async def _pump(stream: ByteReceiveStream, sink: _CappedOutput, done: anyio.Event) -> None:
    try:
        while True:
            try:
                sink.feed(await stream.receive(CHUNK))
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
    finally:
        done.set()


async def _collect(process: Process, sink: _CappedOutput, timeout_s: float) -> int | None:
    """Read output until the shell exits (plus a short linger); None on timeout."""
    assert process.stdout is not None
    exit_code: int | None = None
    eof = anyio.Event()
    with anyio.move_on_after(timeout_s):
        async with anyio.create_task_group() as tg:
            tg.start_soon(_pump, process.stdout, sink, eof)
            exit_code = await process.wait()
            # A background child may still hold the pipe; don't wait for it forever.
            with anyio.move_on_after(LINGER_S):
                await eof.wait()
            tg.cancel_scope.cancel()
    return exit_code


async def _drain(process: Process, sink: _CappedOutput) -> None:
    """Read what the dead group left in the pipe, then close it."""
    if process.stdout is None:
        return
    with anyio.move_on_after(DRAIN_AFTER_KILL_S):
        await _pump(process.stdout, sink, anyio.Event())
    with anyio.move_on_after(TERM_GRACE_S):
        await process.aclose()


async def _kill_group(process: Process) -> None:
    """SIGTERM the command's process group, give it a moment, then SIGKILL it."""
    pgid = process.pid  # the shell leads its own session, so its pid is the group id
    if not _signal_group(pgid, signal.SIGTERM):
        return
    with anyio.move_on_after(TERM_GRACE_S):
        await process.wait()
    if _signal_group(pgid, signal.SIGKILL):
        logger.debug("sent SIGKILL to process group %d", pgid)
    with anyio.move_on_after(TERM_GRACE_S):
        await process.wait()


async def _start(command: str, cwd: Path, env: Mapping[str, str] | None, wrap: Wrap | None) -> Process:
    """The shell (under `wrap` when given), leading a session of its own, known as a live
    session before it is returned: until then its environment marks it as starting, so that
    another command ending meanwhile does not take it for an escapee of its own and kill it."""
    argv = ["/bin/sh", "-c", command]
    with starting_command() as starting:
        process = await anyio.open_process(wrap(argv) if wrap else argv, stdin=subprocess.DEVNULL,
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd,
                                           env={**_command_env(env), **starting}, start_new_session=True)
        announce(process.pid)  # the shell leads its own session: its pid is the session id
        live_sessions.add(process.pid)
    return process


async def run_command(
    command: str,
    cwd: Path,
    *,
    timeout_s: float,
    kind: Kind = "test",
    output_cap_bytes: int = DEFAULT_OUTPUT_CAP,
    env: Mapping[str, str] | None = None,
    wrap: Wrap | None = None,
) -> CommandResult:
    """Run `command` through the shell in `cwd`, in its own process group, with a timeout.

    `env` replaces the inherited environment when given (PYTHONUNBUFFERED=1 is added).
    `wrap` turns the shell's command line into the one started (an agent's sandbox).
    A program that does not exist is not an exception: the shell reports exit code 127.
    If the caller's scope is cancelled, the group is killed before the cancellation
    propagates.
    """
    started_at = time.monotonic()
    strangers = escaped_pids()  # children in sessions of their own that are not this command's
    try:
        process = await _start(command, cwd, env, wrap)
    except OSError as exc:
        logger.warning("could not start %r in %s: %s", command, cwd, exc)
        return CommandResult(
            command=command,
            kind=kind,
            exit_code=None,
            output=f"could not start the command in {cwd}: {exc}",
            duration_s=time.monotonic() - started_at,
            started=False,
        )
    sink = _CappedOutput(output_cap_bytes)
    exit_code: int | None = None
    try:
        exit_code = await _collect(process, sink, timeout_s)
    finally:
        # Shielded: also runs when the caller is cancelled, then the cancel re-raises.
        with anyio.CancelScope(shield=True):
            await _kill_group(process)
            # Children that left the group, or the session too (setsid): until none is left.
            await anyio.to_thread.run_sync(kill_sessions, [process.pid], strangers)
            live_sessions.discard(process.pid)
            await _drain(process, sink)
    timed_out = exit_code is None
    if timed_out:
        logger.info("%r timed out after %s s; its process group was killed", command, timeout_s)
    return CommandResult(
        command=command,
        kind=kind,
        exit_code=exit_code,
        output=sink.text(),
        timed_out=timed_out,
        duration_s=time.monotonic() - started_at,
    )


class Verdict(BaseModel):
    """The outcome of one verification: typecheck steps, then test steps."""

    passed: bool
    failure_type: FailureType | None = None
    digest: Digest | None = None  # of the failing step's output; None when passed
    steps: list[CommandResult]
    tests_passed: int | None = None
    tests_failed: int | None = None
    duration_s: float = 0.0

    @property
    def score(self) -> float:
        """1.0 when passed, else the share of tests that passed when known, else 0.0."""
        if self.passed:
            return 1.0
        total = (self.tests_passed or 0) + (self.tests_failed or 0)
        if self.tests_passed is not None and total > 0:
            return self.tests_passed / total
        return 0.0

    def summary(self) -> str:
        """One line for humans, e.g. 'test_failure: 2 failed, 10 passed — tests/t.py::test_y'."""
        if self.passed:
            if self.tests_passed is not None:
                plural = "" if self.tests_passed == 1 else "s"
                return f"passed: {self.tests_passed} test{plural}"
            return "passed" if self.steps else "passed: no checks configured"
        label = self.failure_type.value if self.failure_type else "failed"
        counts = self._counts()
        detail = self._detail()
        head = f"{label}: {counts}" if counts else label
        return f"{head} — {detail}" if detail else head

    def _counts(self) -> str:
        parts = []
        if self.tests_failed is not None:
            parts.append(f"{self.tests_failed} failed")
        if self.tests_passed is not None:
            parts.append(f"{self.tests_passed} passed")
        return ", ".join(parts)

    def _detail(self) -> str:
        last = self.steps[-1] if self.steps else None
        if last is not None and last.timed_out:
            return f"`{last.command}` timed out"
        if self.digest is not None and self.digest.failing_tests:
            return self.digest.failing_tests[0]
        if self.digest is not None and self.digest.first_error:
            return self.digest.first_error.strip().splitlines()[0]
        if last is not None:
            return f"`{last.command}` exited with {last.exit_code}"
        return ""


def _failure_type(step: CommandResult, digest: Digest) -> FailureType:
    if step.timed_out:
        return FailureType.TIMEOUT
    if not step.started or step.exit_code in (NOT_FOUND_EXIT, NOT_EXECUTABLE_EXIT):
        return FailureType.RUNTIME_ERROR
    if step.kind == "typecheck":
        return FailureType.TYPECHECK_FAILURE
    # A test command that failed without naming failing tests crashed or could not collect.
    if digest.failing_tests or (digest.failed or 0) > 0:
        return FailureType.TEST_FAILURE
    return FailureType.RUNTIME_ERROR


def _failure_digest(step: CommandResult, timeout_s: float, max_tokens: int) -> Digest:
    if not step.timed_out:
        return make_digest(step.output, max_tokens=max_tokens, command=step.command)
    # The prefix counts against the same token budget as the rest of the digest.
    prefix = f"`{step.command}` timed out after {timeout_s:g} s\n"
    budget = max(max_tokens - estimate_tokens(prefix), 0)
    digest = make_digest(step.output, max_tokens=budget, command=step.command)
    return digest.model_copy(update={"text": prefix + digest.text})


def _add(total: int | None, value: int | None) -> int | None:
    if value is None:
        return total
    return value if total is None else total + value


async def verify(cwd: Path, checks: CheckSettings, env: Mapping[str, str] | None = None) -> Verdict:
    """Run typecheck commands, then test commands, stopping at the first failing step.

    The timeout applies to each command. With no commands at all the verdict is passed.
    `env` replaces the inherited environment of every command when given.
    Each command's output is redacted as it is read: every summary, digest, reflection and
    prompt is cut from it, and a secret cut in half would no longer be recognised.
    """
    started_at = time.monotonic()
    timeout_s, digest_tokens = checks.timeout_s, checks.digest_tokens
    steps: list[CommandResult] = []
    passed_count: int | None = None
    failed_count: int | None = None
    for kind, command in checks.steps:
        step = await run_command(
            command, cwd, timeout_s=timeout_s, kind=kind, output_cap_bytes=checks.output_cap_bytes, env=env
        )
        step = step.model_copy(update={"output": redact(step.output)})
        steps.append(step)
        if step.ok and kind == "typecheck":
            continue
        if step.ok:
            counts = make_digest(step.output, max_tokens=digest_tokens, command=command)
            passed_count = _add(passed_count, counts.passed)
            failed_count = _add(failed_count, counts.failed)
            continue
        digest = _failure_digest(step, timeout_s, digest_tokens)
        if kind == "test":
            passed_count = _add(passed_count, digest.passed)
            failed_count = _add(failed_count, digest.failed)
        return Verdict(
            passed=False,
            failure_type=_failure_type(step, digest),
            digest=digest,
            steps=steps,
            tests_passed=passed_count,
            tests_failed=failed_count,
            duration_s=time.monotonic() - started_at,
        )
    return Verdict(
        passed=True,
        steps=steps,
        tests_passed=passed_count,
        tests_failed=failed_count,
        duration_s=time.monotonic() - started_at,
    )


def combine(verdicts: list[Verdict], duration_s: float) -> Verdict:
    """One verdict over the steps of several; the first failing one gives its type and digest."""
    first_failure = next((v for v in verdicts if not v.passed), None)
    return Verdict(
        passed=first_failure is None,
        failure_type=first_failure.failure_type if first_failure else None,
        digest=first_failure.digest if first_failure else None,
        steps=[step for v in verdicts for step in v.steps],
        tests_passed=_total(v.tests_passed for v in verdicts),
        tests_failed=_total(v.tests_failed for v in verdicts),
        duration_s=duration_s,
    )


def _total(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None
