"""Coding agents as presets: how each is run headless and what its output reports.

A preset turns one attempt (prompt, settings goldenloop chose) into the agent's argv and
reads back what the agent reported: tokens, cost, session id, final message. What an
agent does not report stays None (unknown), never 0. The flags are the agents' own
documented headless ones; `orchestrator.executors.agent` runs them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
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
    sandboxed: bool = False  # goldenloop's sandbox confines its writes (an agent's own sandbox may then be off)
    files: tuple[str, ...] = ()  # for an agent that edits only the files it is given: the ones in play


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
    requests: int | None = None  # the model requests its run made, where it says


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
    # Lines it prints that say nothing about this run (regexes, case-blind): left out
    # before its end is diagnosed, so that they are never taken for its failure.
    noise: tuple[str, ...] = ()
    # Variables it needs to run unattended; the user's own environment wins.
    env: dict[str, str] = field(default_factory=dict, hash=False)
    # Where in the home folder it keeps its login, settings, sessions and caches (a folder
    # ends in "/"), and the variables that move them elsewhere when set: writable in its
    # sandbox (orchestrator/executors/confinement.py).
    homes: tuple[str, ...] = ()
    home_variables: tuple[str, ...] = ()
    # Whether it edits only the files it is given (Aider): it then gets the files in play.
    takes_files: bool = False


# -- Claude Code: `claude -p ... --output-format json` ----------------------------------

# `--max-turns` works in print mode although `--help` does not list it. Its sentences when
# it cannot reach or use a model: the server down or unreachable ("API Error: Unable to
# connect to API (ConnectionRefused)"), a model the server does not have (its 404); "Not
# logged in" and "Invalid API key" are common ones.
_CLAUDE_ENVIRONMENT = (r"Unable to connect to API", r"issue with the selected model")
# The program it runs stays the version installed for the whole night.
_CLAUDE_ENV = {"DISABLE_AUTOUPDATER": "1"}


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
    input_tokens, output_tokens = _claude_tokens(result)
    models = list((result.get("modelUsage") or {}).keys())
    # A run its turn or budget limit stopped has no `result`: it says why in `errors`.
    said = result.get("result") or "; ".join(map(str, result.get("errors") or [])) or None
    return Report(input_tokens=input_tokens, output_tokens=output_tokens,
                  cost_usd=_float(result.get("total_cost_usd")), model=models[0] if models else None,
                  session_id=result.get("session_id"), final_message=said, is_error=bool(result.get("is_error")),
                  requests=_int(result.get("num_turns")))  # each turn is one request to its model


def _claude_tokens(result: dict[str, Any]) -> tuple[int | None, int | None]:
    """All its calls' tokens, cached prompt tokens included (as litellm counts them).
    `modelUsage` holds every call; the top-level `usage` missed some on a budget stop."""
    per_model = [u for u in (result.get("modelUsage") or {}).values() if isinstance(u, dict)]
    if per_model:
        prompt = ("inputTokens", "cacheReadInputTokens", "cacheCreationInputTokens")
        return (sum(_int(u.get(k)) or 0 for u in per_model for k in prompt),
                sum(_int(u.get("outputTokens")) or 0 for u in per_model))
    usage = result.get("usage") or {}
    if _int(usage.get("input_tokens")) is None:
        return None, _int(usage.get("output_tokens"))
    prompt = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    return sum(_int(usage.get(k)) or 0 for k in prompt), _int(usage.get("output_tokens"))


# -- Codex CLI: `codex exec --json` (JSONL events; no cost) -----------------------------

# Unattended, a model server that cannot be reached must end the run: by default Codex
# waits for the network without end ("Reconnecting... waiting for network").
_CODEX_UNATTENDED = ("--disable", "unbounded_connection_retries")
# Its sentences when it cannot work: a server without the Responses API (its 404 on
# /v1/responses), a config it refuses (such as `wire_api = "chat"`), the provider's key
# variable unset, a server it cannot reach, a model the server does not have.
_CODEX_ENVIRONMENT = (r"\b404\b.*responses|/v1/responses.*\b404\b", r"Error loading config\.toml",
                      r"Missing environment variable", r"Connection failed:|error sending request",
                      r"The model `[^`]*` does not exist")
# Its warnings about a model it has no metadata for, and about a CODEX_HOME under /tmp.
_CODEX_NOISE = (r"Model metadata for .* not found", r"could not create PATH aliases")


def _codex_argv(prompt: str, scratch: Scratch, s: Settings) -> list[str]:
    # Codex's own sandbox mounts, which a process Landlock restricts may not do: inside
    # goldenloop's sandbox, which confines its writes, it is off unless the user sets one.
    own = "danger-full-access" if s.sandboxed else "workspace-write"
    return [s.program, "exec", "--json", "--sandbox", s.permission_mode or own, *_CODEX_UNATTENDED,
            "--output-last-message", str(scratch.last_message), *_model(s), *s.extra_args, prompt]


def _codex_report(output: str, scratch: Scratch) -> Report:
    report = Report()
    said = None
    for event in _json_lines(output):
        kind, usage = event.get("type"), event.get("usage")
        if kind == "thread.started":
            report.session_id = event.get("thread_id")
        if kind in ("turn.completed", "turn.failed") and isinstance(usage, dict):
            report.input_tokens = (report.input_tokens or 0) + (_int(usage.get("input_tokens")) or 0)
            report.output_tokens = (report.output_tokens or 0) + (_int(usage.get("output_tokens")) or 0)
        # Only a failed turn is its failure: an "error" event is a retry it is making
        # ("Reconnecting... 2/5"), and an item of type error a warning.
        if kind == "turn.failed":
            report.is_error, said = True, _find(event.get("error"), "message")
        elif kind == "item.completed" and (event.get("item") or {}).get("type") == "agent_message":
            said = event["item"].get("text") or said
    report.final_message = said if report.is_error else _read(scratch.last_message) or said
    return report  # cost_usd stays None: Codex does not report one


# -- Aider: `aider --message-file ... --yes-always --no-pretty` -------------------------

_AIDER_COST = re.compile(r"Cost: \$([0-9.]+) message")
# "Tokens: 2.1k sent, 150 received.", with "1.5k cache write, 900 cache hit," between the
# two when the model caches prompts; "sent" already holds what was cached.
_AIDER_TOKENS = re.compile(r"Tokens: ([0-9.]+[kM]?) sent,(?: [0-9.]+[kM]? cache (?:write|hit),)* "
                           r"([0-9.]+[kM]?) received")
# Unattended, `--yes-always` would accept the release notes (a browser), analytics and
# any URL in the prompt. goldenloop commits the work itself, so Aider's commit-message
# call (whose tokens it never prints) is not made; unstreamed, its token counts are the
# server's own rather than litellm's estimate. Once its chat passes 1024 tokens (for a
# model it does not know) it summarises the chat for a next message that never comes: a
# model call whose tokens it never prints, and whose failure reads as the run's own.
_AIDER_UNATTENDED = ("--no-show-release-notes", "--no-analytics", "--no-check-update", "--no-show-model-warnings",
                     "--no-detect-urls", "--no-auto-commits", "--no-stream", "--max-chat-history-tokens", "1000000000")


def _aider_argv(prompt: str, scratch: Scratch, s: Settings) -> list[str]:
    # Its chat history goes outside the repository, and .gitignore is left alone: either
    # would be a change the loop commits. It has no turn or cost limit to pass.
    argv = [s.program, "--message-file", str(scratch.prompt), "--yes-always", "--no-pretty", "--no-gitignore",
            *_AIDER_UNATTENDED, "--chat-history-file", str(scratch.folder / "chat.md"),
            "--input-history-file", str(scratch.folder / "input.history")]
    if scratch.conventions.exists():
        argv += ["--read", str(scratch.conventions)]
    for name in s.files:  # it edits only the files in its chat: a file it must ask for costs a call
        argv += ["--file", name]
    return argv + _model(s) + list(s.extra_args)


def _aider_report(output: str, scratch: Scratch) -> Report:
    costs = [float(m) for m in _AIDER_COST.findall(output)]
    tokens = _AIDER_TOKENS.findall(output)
    return Report(input_tokens=sum(_count(sent) for sent, _ in tokens) if tokens else None,
                  output_tokens=sum(_count(got) for _, got in tokens) if tokens else None,
                  cost_usd=sum(costs) if costs else None,
                  requests=len(tokens) if tokens else None)  # a "Tokens:" line per request


# Aider exits 0 whatever happened; these lines are how it says it stopped short. An API
# error is followed by "Retrying in ..." while it still retries, so one with no such
# line after it is the error it gave up on.
_AIDER_GAVE_UP = (r"Empty response received from LLM", r"^litellm\.\w+Error:(?![\s\S]*^Retrying in)")


# -- mini-swe-agent: `mini -t ... --yolo --exit-immediately -o traj.json` ---------------

# Its limits end a run cleanly: the edits made so far are judged by the checks.
_MINI_LIMITS = ("LimitsExceeded", "TimeExceeded")


def _mini_argv(prompt: str, scratch: Scratch, s: Settings) -> list[str]:
    # A `-c` replaces its default config unless that is named too; the configs merge in
    # order, so the step limit comes after any config file in extraArgs (which sets its own).
    argv = [s.program, "-t", prompt, "--yolo", "--exit-immediately", "-o", str(scratch.trajectory), "-c", "mini.yaml"]
    if s.budget_usd is not None and s.budget_usd > 0:  # its 0 means "no limit"
        argv += ["--cost-limit", f"{s.budget_usd:.4f}"]
    return argv + _model(s) + list(s.extra_args) + ["-c", f"agent.step_limit={s.max_turns}"]


def _mini_report(output: str, scratch: Scratch) -> Report:
    trajectory = _read_json(scratch.trajectory)
    info = trajectory.get("info") or {}
    stats = info.get("model_stats") or {}
    usages = [_find(m.get("extra"), "usage") for m in trajectory.get("messages") or [] if isinstance(m, dict)]
    usages = [u for u in usages if isinstance(u, dict)]
    cost = _float(stats.get("instance_cost"))
    status = info.get("exit_status")
    return Report(input_tokens=sum(_int(u.get("prompt_tokens")) or 0 for u in usages) if usages else None,
                  output_tokens=sum(_int(u.get("completion_tokens")) or 0 for u in usages) if usages else None,
                  cost_usd=cost if cost else None,  # an unpriced model's calls are recorded as $0
                  final_message=_mini_last_word(trajectory, info),
                  is_error=status not in (None, "Submitted", *_MINI_LIMITS), requests=_int(stats.get("api_calls")))


def _mini_last_word(trajectory: dict[str, Any], info: dict[str, Any]) -> str | None:
    """Its submission, the limit it stopped at, or the error it exited on."""
    status = info.get("exit_status")
    if status in _MINI_LIMITS:
        agent = _find(info.get("config"), "agent") or {}
        stats = info.get("model_stats") or {}
        return (f"{status}: stopped after {stats.get('api_calls')} model calls (step limit "
                f"{agent.get('step_limit')}, cost limit ${agent.get('cost_limit')})")
    if info.get("submission"):
        return info["submission"]
    empty = _mini_empty_replies(trajectory)
    if empty and status:  # its own error (a format error) never says the model answered nothing
        return f"empty reply from the model, {empty} time(s), then {status}"
    said = [m.get("content") for m in trajectory.get("messages") or [] if isinstance(m, dict)
            and m.get("role") in ("exit", "assistant")]  # an exit's content is the error it exited on
    return next((text for text in reversed(said) if isinstance(text, str) and text.strip()), status)


def _mini_empty_replies(trajectory: dict[str, Any]) -> int:
    """How many replies the model gave, when every one was empty (no text, no tool call); 0 else."""
    replies = []
    for message in trajectory.get("messages") or []:
        extra = message.get("extra") if isinstance(message, dict) else None
        response = extra.get("response") if isinstance(extra, dict) else None
        choices = response.get("choices") if isinstance(response, dict) else None
        if choices and isinstance(choices[0], dict):
            said = choices[0].get("message") or {}
            replies.append(bool(str(said.get("content") or "").strip() or said.get("tool_calls")))
    return len(replies) if replies and not any(replies) else 0


# -- OpenHands: `openhands --headless --json --override-with-envs -f task.md` ------------

# It prints the conversation id as text, and its JSONL events carry no usage: its tokens
# and cost are in the conversation it saves (`base_state.json`'s stats).
_OPENHANDS_ID = re.compile(r"^Conversation ID: ([0-9a-f]{32})\s*$", re.M)


def _openhands_argv(prompt: str, scratch: Scratch, s: Settings) -> list[str]:
    # Headless, it approves every action. It ignores LLM_MODEL, LLM_BASE_URL and
    # LLM_API_KEY without --override-with-envs. 1.16 has no turn or cost limit to pass.
    return [s.program, "--headless", "--json", "--override-with-envs", "-f", str(scratch.prompt), *s.extra_args]


def _openhands_report(output: str, scratch: Scratch) -> Report:
    report = Report()
    for event in _json_lines(output):
        kind, action = event.get("kind"), event.get("action")
        if kind == "ConversationErrorEvent":  # it still exits 0
            report.is_error, report.final_message = True, f"{event.get('code')}: {event.get('detail')}"
        elif kind == "ActionEvent" and isinstance(action, dict) and action.get("kind") == "FinishAction":
            report.final_message = action.get("message")
        elif kind == "MessageEvent" and event.get("source") == "agent":
            report.final_message = _texts(event.get("llm_message")) or report.final_message
    ids = _OPENHANDS_ID.findall(output)
    if ids:
        report.session_id = ids[-1]
        _openhands_usage(report, _openhands_conversations() / ids[-1] / "base_state.json")
    return report


def _openhands_conversations() -> Path:
    """Where OpenHands saves conversations, found as it finds it."""
    persistence = os.environ.get("OPENHANDS_PERSISTENCE_DIR") or str(Path.home() / ".openhands")
    return Path(os.environ.get("OPENHANDS_CONVERSATIONS_DIR") or Path(persistence) / "conversations")


def _openhands_usage(report: Report, path: Path) -> None:
    state = _read_json(path)
    report.model = ((state.get("agent") or {}).get("llm") or {}).get("model")  # the stats may name another
    stats = state.get("stats") or {}
    metrics = [m for m in (stats.get("usage_to_metrics") or {}).values() if isinstance(m, dict)]  # agent, condenser
    tokens = [m.get("accumulated_token_usage") or {} for m in metrics]
    if not tokens:
        return
    report.requests = sum(len(m.get("token_usages") or []) for m in metrics) or None  # one per response
    report.input_tokens = sum(_int(t.get("prompt_tokens")) or 0 for t in tokens)
    report.output_tokens = sum(_int(t.get("completion_tokens")) or 0 for t in tokens)
    # A call litellm cannot price adds $0 and no entry to `costs`: unknown, not free.
    if any(m.get("costs") for m in metrics):
        report.cost_usd = sum(_float(m.get("accumulated_cost")) or 0.0 for m in metrics)


def _texts(message: Any) -> str | None:
    """The text parts of an LLM message's content, joined."""
    parts = message.get("content") if isinstance(message, dict) else None
    texts = [p.get("text") for p in parts or [] if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "\n".join(texts).strip() or None


# No key or model for --override-with-envs (exit 1), a model the server lacks.
_OPENHANDS_ENVIRONMENT = (r"Missing required environment variable", r"litellm\.NotFoundError")
# Its public skills download (a git clone at every start) and litellm's price table
# download: both fail offline and change nothing.
_OPENHANDS_NOISE = (r"OpenHands/extensions", r"model_prices_and_context_window\.json")
# The price table bundled with it, not fetched at each start; no banner; its console
# wide, so that no sentence quoted from it is cut at 80 columns.
_OPENHANDS_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENHANDS_SUPPRESS_BANNER": "1", "COLUMNS": "400"}


# Their consoles wrap at 80 columns, which would cut the sentence quoted from them.
_WIDE = {"COLUMNS": "400"}
# litellm's price table as installed, not downloaded at each start.
_LOCAL_PRICES = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}
# mini-swe-agent asks for a model and a key on its first run unless configured, and stops
# at the first call of a model litellm cannot price unless told to ignore that. (Its
# errors are read from its trajectory, whole.)
_MINI_ENV = {**_LOCAL_PRICES, "MSWEA_CONFIGURED": "true", "MSWEA_COST_TRACKING": "ignore_errors"}


PRESETS: dict[str, Preset] = {
    "claude-code": Preset("claude-code", "claude", _claude_argv, _claude_report, memory_file="CLAUDE.md",
                          environment=_CLAUDE_ENVIRONMENT, env=_CLAUDE_ENV,
                          homes=(".claude/", ".claude.json", ".claude.json.backup", ".cache/claude/",
                                 ".config/claude/"), home_variables=("CLAUDE_CONFIG_DIR",)),
    "codex": Preset("codex", "codex", _codex_argv, _codex_report, memory_file="AGENTS.md",
                    environment=_CODEX_ENVIRONMENT, noise=_CODEX_NOISE, homes=(".codex/",),
                    home_variables=("CODEX_HOME",)),
    "aider": Preset("aider", "aider", _aider_argv, _aider_report, caches=(".aider.tags.cache.v*",),
                    environment=(r"litellm\.NotFoundError",), gave_up=_AIDER_GAVE_UP,
                    # its model-info download, which fails offline and changes nothing
                    noise=(r"model_prices_and_context_window\.json",), env={**_WIDE, **_LOCAL_PRICES},
                    homes=(".aider/", ".aider.chat.history.md", ".aider.input.history", ".cache/aider/"),
                    takes_files=True),
    "mini-swe-agent": Preset("mini-swe-agent", "mini", _mini_argv, _mini_report, env=_MINI_ENV,
                             environment=(r"^Aborted\.?$",  # its first-run wizard, with no terminal
                                          r"litellm\.NotFoundError", r"Error calculating cost for model"),
                             # its tracebacks' framed source lines, which name exceptions never raised
                             noise=(r"^[│╭╰]",), homes=(".config/mini-swe-agent/", ".cache/mini-swe-agent/")),
    "openhands": Preset("openhands", "openhands", _openhands_argv, _openhands_report, memory_file="AGENTS.md",
                        environment=_OPENHANDS_ENVIRONMENT, noise=_OPENHANDS_NOISE,
                        env=_OPENHANDS_ENV, homes=(".openhands/", ".cache/openhands/")),
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


def _read_json(path: Path) -> dict[str, Any]:
    """A JSON object file the agent wrote; {} when it wrote none."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None
