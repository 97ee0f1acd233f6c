"""Coding agents as presets: how each is run headless and what its output reports.

A preset turns one attempt (prompt, settings goldenloop chose) into the agent's argv and
reads back what the agent reported: tokens, cost, session id, final message. What an
agent does not report stays None (unknown), never 0. The flags are the agents' own
documented headless ones; `orchestrator.executors.agent` runs them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# What goldenloop asks of every agent, on top of the prompt: its commits are folded and
# its changes judged, but a push or an edit to goldenloop's state cannot be undone.
RULES = ("You are run by goldenloop. Never push, never create or switch branches, and never touch "
         ".openagents/: goldenloop verifies and commits your changes itself.")
DEFAULT_TURNS = 30


@dataclass(frozen=True)
class Settings:
    """What goldenloop decides for one attempt of an agent."""

    program: str
    model: str | None = None
    max_turns: int = DEFAULT_TURNS
    permission_mode: str | None = None
    extra_args: tuple[str, ...] = ()
    budget_usd: float | None = None  # the task's/run's remaining cost budget; None: no limit


@dataclass
class Report:
    """What the agent said about its own run; None: it did not say."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    model: str | None = None
    session_id: str | None = None
    final_message: str | None = None
    is_error: bool = False


@dataclass(frozen=True)
class Scratch:
    """Files of one attempt, in a private folder outside the repository."""

    folder: Path

    @property
    def prompt(self) -> Path:
        return self.folder / "prompt.md"

    @property
    def last_message(self) -> Path:
        return self.folder / "last-message.txt"

    @property
    def trajectory(self) -> Path:
        return self.folder / "trajectory.json"

    @property
    def conventions(self) -> Path:
        return self.folder / "conventions.md"


Build = Callable[[str, Scratch, Settings], list[str]]
Parse = Callable[[str, Scratch], Report]


@dataclass(frozen=True)
class Preset:
    kind: str
    program: str  # the usual name on PATH
    build: Build
    parse: Parse
    memory_file: str | None = None  # the agent's own memory file in the repository
    # Caches the agent leaves in the repository root (globs): removed when new, or the
    # loop would commit them.
    caches: tuple[str, ...] = ()
    # What this agent prints (regexes, case-blind) when it could not work at all, beyond
    # agent_end.COMMON_ENVIRONMENT; and when it failed although it exited 0.
    environment: tuple[str, ...] = ()
    gave_up: tuple[str, ...] = ()


# -- Claude Code: `claude -p ... --output-format json` ----------------------------------


def _claude_argv(prompt: str, scratch: Scratch, s: Settings) -> list[str]:
    argv = [s.program, "-p", prompt, "--output-format", "json", "--max-turns", str(s.max_turns),
            "--permission-mode", s.permission_mode or "acceptEdits", "--append-system-prompt", RULES]
    if s.budget_usd is not None:
        argv += ["--max-budget-usd", f"{s.budget_usd:.4f}"]
    return argv + _model(s) + list(s.extra_args)


def _claude_report(output: str, scratch: Scratch) -> Report:
    result = next((e for e in reversed(list(_json_lines(output))) if e.get("type") == "result"), None)
    if result is None:
        return Report()
    usage = result.get("usage") or {}
    models = list((result.get("modelUsage") or {}).keys())
    return Report(input_tokens=_int(usage.get("input_tokens")), output_tokens=_int(usage.get("output_tokens")),
                  cost_usd=_float(result.get("total_cost_usd")), model=models[0] if models else None,
                  session_id=result.get("session_id"), final_message=result.get("result"),
                  is_error=bool(result.get("is_error")))


# -- Codex CLI: `codex exec --json` (JSONL events; no cost) -----------------------------


def _codex_argv(prompt: str, scratch: Scratch, s: Settings) -> list[str]:
    return [s.program, "exec", "--json", "--sandbox", s.permission_mode or "workspace-write",
            "--output-last-message", str(scratch.last_message), *_model(s), *s.extra_args, prompt]


def _codex_report(output: str, scratch: Scratch) -> Report:
    report = Report()
    for event in _json_lines(output):
        kind = event.get("type")
        if kind == "thread.started":
            report.session_id = event.get("thread_id")
        elif kind in ("turn.completed", "turn.failed") and isinstance(event.get("usage"), dict):
            report.input_tokens = (report.input_tokens or 0) + (_int(event["usage"].get("input_tokens")) or 0)
            report.output_tokens = (report.output_tokens or 0) + (_int(event["usage"].get("output_tokens")) or 0)
        if kind in ("turn.failed", "error"):
            report.is_error = True
    report.final_message = _read(scratch.last_message)
    return report  # cost_usd stays None: Codex does not report one


# -- Aider: `aider --message-file ... --yes-always --no-pretty` -------------------------

_AIDER_COST = re.compile(r"Cost: \$([0-9.]+) message")
_AIDER_TOKENS = re.compile(r"Tokens: ([0-9.]+[kM]?) sent, ([0-9.]+[kM]?) received")


def _aider_argv(prompt: str, scratch: Scratch, s: Settings) -> list[str]:
    # Its chat history goes outside the repository, and .gitignore is left alone: either
    # would be a change the loop commits.
    argv = [s.program, "--message-file", str(scratch.prompt), "--yes-always", "--no-pretty", "--no-gitignore",
            "--chat-history-file", str(scratch.folder / "chat.md"),
            "--input-history-file", str(scratch.folder / "input.history")]
    if scratch.conventions.exists():
        argv += ["--read", str(scratch.conventions)]
    return argv + _model(s) + list(s.extra_args)


def _aider_report(output: str, scratch: Scratch) -> Report:
    costs = [float(m) for m in _AIDER_COST.findall(output)]
    tokens = _AIDER_TOKENS.findall(output)
    return Report(input_tokens=sum(_count(sent) for sent, _ in tokens) if tokens else None,
                  output_tokens=sum(_count(got) for _, got in tokens) if tokens else None,
                  cost_usd=sum(costs) if costs else None)


# -- mini-swe-agent: `mini -t ... --yolo --exit-immediately -o traj.json` ---------------


def _mini_argv(prompt: str, scratch: Scratch, s: Settings) -> list[str]:
    argv = [s.program, "-t", prompt, "--yolo", "--exit-immediately", "-o", str(scratch.trajectory)]
    if s.budget_usd is not None and s.budget_usd > 0:  # its 0 means "no limit"
        argv += ["--cost-limit", f"{s.budget_usd:.4f}"]
    return argv + _model(s) + list(s.extra_args)


def _mini_report(output: str, scratch: Scratch) -> Report:
    try:
        info = json.loads(scratch.trajectory.read_text(encoding="utf-8")).get("info") or {}
    except (OSError, ValueError, AttributeError):
        return Report()
    stats = info.get("model_stats") or {}
    return Report(cost_usd=_float(stats.get("instance_cost")), final_message=info.get("submission"),
                  is_error=info.get("exit_status") not in (None, "Submitted"))


# -- OpenHands: `openhands --headless --json -f task.md` --------------------------------


def _openhands_argv(prompt: str, scratch: Scratch, s: Settings) -> list[str]:
    # The model comes from LLM_MODEL, which only --override-with-envs applies.
    model = ["--override-with-envs"] if s.model else []
    return [s.program, "--headless", "--json", "-f", str(scratch.prompt), *model, *s.extra_args]


def _openhands_report(output: str, scratch: Scratch) -> Report:
    report = Report()
    for event in _json_lines(output):
        cost = _find(event, "accumulated_cost")
        report.cost_usd = _float(cost) if cost is not None else report.cost_usd
        report.session_id = _find(event, "conversation_id") or report.session_id
        if event.get("action") == "finish":
            report.final_message = _find(event, "final_thought") or _find(event, "message")
    return report


PRESETS: dict[str, Preset] = {
    "claude-code": Preset("claude-code", "claude", _claude_argv, _claude_report, memory_file="CLAUDE.md"),
    "codex": Preset("codex", "codex", _codex_argv, _codex_report, memory_file="AGENTS.md",
                    environment=(r"\b404\b.*responses|/v1/responses.*\b404\b",)),  # a server without the Responses API
    "aider": Preset("aider", "aider", _aider_argv, _aider_report, caches=(".aider.tags.cache.v*",),
                    gave_up=(r"Empty response received from LLM",)),
    "mini-swe-agent": Preset("mini-swe-agent", "mini", _mini_argv, _mini_report,
                             environment=(r"^Aborted\.?$",)),  # its first-run wizard, with no terminal
    "openhands": Preset("openhands", "openhands", _openhands_argv, _openhands_report, memory_file="AGENTS.md",
                        gave_up=(r"ConversationErrorEvent",)),
}


# -- reading output -------------------------------------------------------------------


def _model(s: Settings) -> list[str]:
    return ["--model", s.model] if s.model else []


def _json_lines(output: str) -> Iterator[dict[str, Any]]:
    """Every line of the output that is a JSON object (stderr is interleaved)."""
    for line in output.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                yield value


def _find(value: Any, key: str) -> Any:
    """`key`'s first value anywhere in nested dicts and lists; None if absent."""
    if isinstance(value, dict):
        if value.get(key) is not None:
            return value[key]
        value = list(value.values())
    if isinstance(value, list):
        return next((found for v in value if (found := _find(v, key)) is not None), None)
    return None


def _count(text: str) -> int:
    """Aider's "2.1k" / "1.2M" token counts."""
    scale = {"k": 1_000, "M": 1_000_000}.get(text[-1], 1)
    return round(float(text.rstrip("kM")) * scale)


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None
