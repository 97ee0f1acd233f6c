"""How a coding agent's run ended: done, gave up, or could not work at all.

- **done**: the agent ran and said nothing went wrong; the checks judge its changes.
- **agent**: it ran and tried, then failed by its own account (an error it reported, a
  non-zero exit, a timeout, or words that mean failure behind exit 0, such as Aider's
  empty reply from the model): worth a retry, told the agent's last word.
- **environment**: it never got to work (not installed, not logged in, the model server
  refused or cannot be reached, a first-run wizard, an endpoint the server lacks, a spent
  quota): no retry can help, so the task stops with the agent's own sentence, and the run
  stops when task after task meets the same one.

What an agent prints is its own: the sentence quoted is a line of its output (or the
final message it reported), redacted and on one line, never the command line that ran
it (which holds the whole prompt).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from orchestrator.checks.verify import CommandResult
from orchestrator.executors.command import COMMAND_NOT_FOUND
from orchestrator.executors.presets import Preset, Report
from reflection.redact import redact
from reflection.text import one_line

EndKind = Literal["done", "agent", "environment", "limit"]
SENTENCE_CHARS = 400
TAIL_LINES = 80  # an agent's own complaint is near the end of what it printed

# Words any agent prints when it cannot reach or use a model: the environment's fault.
COMMON_ENVIRONMENT = (
    r"connection refused|ECONNREFUSED|failed to connect|could not connect|APIConnectionError|connection error",
    r"could not resolve host|name or service not known|getaddrinfo|ENOTFOUND",
    r"\b401\b.*(?:unauthori[sz]ed|api.?key|auth)|invalid (?:x-)?api[ _-]?key|incorrect api key|"
    r"authentication_error|AuthenticationError",
    r"insufficient_quota|exceeded your current quota|credit balance is too low",
    r"not logged in|please run /login",
    r"^goldenloop sandbox: ",  # its sandbox could not be set up: nothing ran
)
# A model server's refusal of the request itself (a 4xx) or an empty reply: the same one
# on two runs in a row is the environment, which no retry's prompt changes.
# A bare "404" is not enough: a test's "assert 404 == 200" is the code's failure, not the server's.
_REFUSAL = re.compile(r"(?:HTTP|status|error|code)[ :=]*4\d\d\b|BadRequestError|NotFoundError|"
                      r"UnprocessableEntityError|PermissionDeniedError|"
                      r"empty (?:response|reply|answer|message)|no (?:content|choices) (?:in|was returned)", re.I)
_FAILURE_WORDS = re.compile(r"error|failed|exception|abort|refused|denied|cannot|can't|unable", re.I)


@dataclass(frozen=True)
class AgentEnd:
    kind: EndKind
    sentence: str = ""  # the agent's words: why it did not do the work (one line, redacted)
    resets_at: float | None = None  # "limit": when its usage limit resets (epoch seconds), if it said


def diagnose(preset: Preset, done: CommandResult, report: Report, timeout_s: float) -> AgentEnd:
    """Which of the three ends a finished agent process had, and in whose words."""
    done = done.model_copy(update={"output": _without(preset.noise, done.output)}) if preset.noise else done
    if not done.started or done.exit_code == COMMAND_NOT_FOUND:
        return AgentEnd("environment", f"the agent program could not be started: {_last_line(done.output)}".rstrip(": "))
    if done.timed_out:
        return AgentEnd("agent", f"the agent run was stopped after the {timeout_s:g} s limit (executor.timeoutSeconds)")
    gave_up = _first_match(preset.gave_up, done.output)
    failed = done.exit_code != 0 or report.is_error or gave_up is not None
    if not failed:
        return AgentEnd("done")
    words = "\n".join(filter(None, (report.final_message, _tail(done.output))))
    limit = usage_limit(done.output, words)
    if limit is not None:
        return limit
    environment = _first_match((*preset.environment, *COMMON_ENVIRONMENT), words)
    if environment is not None:
        return AgentEnd("environment", _sentence(environment))
    said = report.final_message if report.is_error and report.final_message else gave_up
    return AgentEnd("agent", _sentence(said or _complaint(done.output) or f"it exited with code {done.exit_code}"))


def _first_match(patterns: tuple[str, ...], text: str) -> str | None:
    """The first line of `text` that one of `patterns` finds (case-blind), or None."""
    for pattern in patterns:
        match = re.search(pattern, text, re.I | re.M)
        if match:
            start = text.rfind("\n", 0, match.start()) + 1
            end = text.find("\n", match.end())
            return text[start : end if end != -1 else len(text)]
    return None


def _without(patterns: tuple[str, ...], output: str) -> str:
    """The output less the lines that one of `patterns` finds (case-blind)."""
    noise = re.compile("|".join(f"(?:{p})" for p in patterns), re.I)
    return "\n".join(line for line in output.splitlines() if not noise.search(line))


def _tail(output: str) -> str:
    return "\n".join(output.rstrip().splitlines()[-TAIL_LINES:])


def _complaint(output: str) -> str | None:
    """The last line that sounds like a failure, else the last line at all."""
    lines = [line for line in _tail(output).splitlines() if line.strip()]
    return next((line for line in reversed(lines) if _FAILURE_WORDS.search(line)), lines[-1] if lines else None)


def _last_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    return _sentence(lines[-1]) if lines else ""


def _sentence(text: str) -> str:
    return one_line(redact(text.strip()), SENTENCE_CHARS)


def refused_again(sentence: str, before: str | None) -> bool:
    """Whether an agent's failure `sentence` is the model server refusing the request (a
    4xx) or answering nothing, word for word as the run `before` it failed."""
    return sentence == before and _REFUSAL.search(sentence) is not None


# A subscription's usage window spent: Claude Code's `rate_limit_event` (status "rejected",
# `resetsAt`), or its older "usage limit reached|<epoch>"; any agent's 429 naming a wait.
_LIMIT_WORDS = re.compile(r"usage limit reached\|(\d{9,13})|you've hit your (?:usage )?limit|"
                          r"\b429\b.*?retry[- ]after\D{0,3}(\d+)", re.I)


def usage_limit(output: str, words: str) -> AgentEnd | None:
    """The agent stopped at a usage limit: the end of its run, and when the limit resets."""
    for event in _json_objects(output):
        info = event.get("rate_limit_info") if event.get("type") == "rate_limit_event" else None
        if isinstance(info, dict) and info.get("status") == "rejected":
            resets = _epoch(info.get("resetsAt"))
            kind = info.get("rateLimitType") or "usage"
            return AgentEnd("limit", f"its {kind} limit is reached{_until(resets)}", resets)
    match = _LIMIT_WORDS.search(words)
    if match is None:
        return None
    resets = _epoch(match.group(1)) if match.group(1) else None
    if match.group(2):
        resets = time.time() + float(match.group(2))
    return AgentEnd("limit", _sentence(match.group(0).split("|")[0]) + _until(resets), resets)


def _json_objects(output: str) -> list[dict]:
    found = []
    for line in output.splitlines():
        if line.startswith("{") and "rate_limit" in line:
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                found.append(value)
    return found


def _epoch(value: object) -> float | None:
    """Epoch seconds from seconds or milliseconds; None when it is no time."""
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return seconds / 1000 if seconds > 1e12 else seconds


def _until(resets: float | None) -> str:
    if resets is None:
        return ""
    return f"; it resets at {datetime.fromtimestamp(resets).astimezone():%Y-%m-%d %H:%M %Z}"
