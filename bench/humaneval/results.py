"""The result file: per mode, per problem, as each problem finishes; and its figures.

A problem's result is read back from its repository, not from memory: the task's status
in `tasks.jsonl`, the attempts in `subtasks/<taskId>.json`, the reflections file and the
`model_call` events of every run log. So a problem that finished in a run killed before
the result file was written, or one that needed several runs, is counted in full.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Literal

import orjson
from pydantic import Field

from orchestrator.loop.plan import SubtaskPlan
from reflection.fileio import atomic_write
from reflection.schema import CamelModel, utc_now

FORMAT = "goldenloop-humaneval/1"
PASSING = ("passed", "flaky", "preexisting")  # attempt outcomes the loop commits
FINISHED = ("closed", "blocked")  # task statuses that end a problem
TASK_ENDS = ("task_closed", "task_blocked")  # the run log's events for them


class ProblemResult(CamelModel):
    """One problem in one mode."""

    outcome: Literal["passed", "failed"]
    passed_at: int | None = None  # the attempt that passed
    attempts: int = 0
    reflections: int = 0
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    # Input tokens a prompt cache serves: as the provider reported them, else estimated from
    # the share of each prompt that an earlier prompt began with (model_call's prefixChars).
    cached_tokens: int = 0
    # None: some call had no known price. The default is None too, so a file that
    # leaves the key out (an unknown cost is not written) reads back as unknown, not $0.
    cost_usd: float | None = None
    wall_s: float = 0.0
    convergence: str | None = None  # why the attempts stopped (passed, max_retries, ...)
    reason: str = ""
    # How the model's replies went: the first attempt's reply applied, every edit reply
    # (re-asks included) and those applied, and replies that gave back failed code.
    first_applied: bool | None = None
    replies: int = 0
    replies_applied: int = 0
    repeats_asked_again: int = 0
    repeats_counted: int = 0
    formats_asked: dict[str, int] = Field(default_factory=dict)
    # Tokens (input + output) of each attempt, its re-asks and its reflection included, in
    # order: what the problem had spent by attempt k, for comparing modes at equal tokens.
    attempt_tokens: list[int] = Field(default_factory=list)
    # Tokens of the calls after the task ended: its outcome reflection, a lesson for later
    # tasks (in the totals, and in the last attempt's tokens above).
    lesson_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class ModeSettings(CamelModel):
    label: str
    reflexion: bool
    max_attempts: int
    fresh: bool = False  # every retry a fresh sample (resample)
    temperature: float | None = None  # the mode's sampling temperature; None: the provider's


class ModeRecord(CamelModel):
    settings: ModeSettings
    problems: dict[str, ProblemResult] = Field(default_factory=dict)  # by task id "HumanEval/0"
    wall_s: float = 0.0  # all runs of this mode, interrupted ones included


class ResultFile(CamelModel):
    format: str = FORMAT
    model: str
    dataset: dict[str, str]
    protocol: dict[str, object]
    machine: dict[str, object] = Field(default_factory=lambda: machine_info())
    selection: list[str] = Field(default_factory=list)  # the problems the figures are over
    modes: dict[str, ModeRecord] = Field(default_factory=dict)
    created_at: datetime = Field(default_factory=utc_now)
    updated_at: datetime = Field(default_factory=utc_now)

    @classmethod
    def load(cls, path: Path) -> ResultFile | None:
        try:
            return cls.model_validate(orjson.loads(path.read_bytes()))
        except FileNotFoundError:
            return None

    def save(self, path: Path) -> None:
        self.updated_at = utc_now()
        atomic_write(path, orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2) + b"\n")


def machine_info() -> dict[str, object]:
    memory = None
    try:
        memory = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    return {
        "cpus": os.cpu_count(),
        "memoryGiB": memory,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }


# -- reading a problem's repository ---------------------------------------------------


def task_record(repo_dir: Path, task_id: str) -> dict[str, object]:
    """The task's line in tasks.jsonl ({} when it is missing)."""
    path = repo_dir / ".openagents" / "tasks.jsonl"
    for line in path.read_bytes().splitlines():
        try:
            body = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(body, dict) and body.get("id") == task_id:
            return body
    return {}


def result_from_repo(repo_dir: Path, task_id: str, wall_s: float) -> ProblemResult | None:
    """The problem's result, or None while its task is not finished (open, in progress)."""
    task = task_record(repo_dir, task_id)
    status = task.get("status")
    if status not in FINISHED:
        return None
    plan = SubtaskPlan.load(SubtaskPlan.path_for(repo_dir, task_id))
    attempts = [a for s in plan.subtasks for a in s.attempts] if plan else []
    passed_at = next((a.number for a in attempts if a.outcome in PASSING), None)
    convergence = plan.subtasks[-1].convergence if plan and plan.subtasks else None
    result = ProblemResult(
        outcome="passed" if status == "closed" else "failed",
        passed_at=passed_at if status == "closed" else None,
        attempts=len(attempts),
        reflections=_attempt_reflections(repo_dir / ".openagents" / "memory" / "reflections.jsonl"),
        wall_s=round(wall_s, 3),
        convergence=convergence,
        reason=str(task.get("closeReason") or "")[:300],
        cost_usd=0.0,
        first_applied=attempts[0].outcome != "edit_failed" if attempts else None,
        repeats_counted=sum(a.outcome == "repeat" for a in attempts),
    )
    for attempt in attempts:
        if attempt.format_asked:
            result.formats_asked[attempt.format_asked] = result.formats_asked.get(attempt.format_asked, 0) + 1
    _add_run_events(result, repo_dir)
    return result


def _attempt_reflections(path: Path) -> int:
    """Reflections written for retries; a task's outcome reflection (a `kind` key) is not one."""
    try:
        lines = path.read_bytes().splitlines()
    except FileNotFoundError:
        return 0
    return sum(1 for line in lines if line.strip() and b'"kind"' not in line)


def _add_run_events(result: ProblemResult, repo_dir: Path) -> None:
    """Sum the model calls, edit replies and re-asks of every run log of the repository."""
    not_applied = before = 0  # before: tokens of calls before the first attempt (a plan)
    ended = False  # the task closed or blocked: later calls write its lessons
    for path in sorted((repo_dir / ".openagents" / "runs").glob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # a line torn by a kill
            kind = event.get("event")
            not_applied += kind in ("edit_failed", "code_asked")  # a reply with only its reflection held no edit
            result.repeats_asked_again += kind == "repeat" and event.get("action") == "asked again"
            if kind == "attempt_started":
                result.attempt_tokens.append(0)
            ended = ended or kind in TASK_ENDS
            if kind != "model_call":
                continue
            result.replies += event.get("purpose") == "execute"
            result.calls += 1
            tokens = (event.get("inputTokens") or 0, event.get("outputTokens") or 0)
            result.input_tokens += tokens[0]
            result.cached_tokens += _cached(event, tokens[0])
            result.output_tokens += tokens[1]
            result.lesson_tokens += sum(tokens) if ended else 0
            if result.attempt_tokens:
                result.attempt_tokens[-1] += sum(tokens)
            else:
                before += sum(tokens)
            cost = event.get("costUsd")
            result.cost_usd = None if cost is None or result.cost_usd is None else result.cost_usd + cost
    result.replies_applied = result.replies - not_applied
    if result.attempt_tokens:
        result.attempt_tokens[0] += before


def _cached(event: dict, input_tokens: int) -> int:
    """A call's cached input tokens: reported, or its repeated prefix's share of the prompt."""
    reported = event.get("cachedTokens")
    if isinstance(reported, int):
        return reported
    prompt, prefix = event.get("promptChars") or 0, event.get("prefixChars") or 0
    return round(input_tokens * prefix / prompt) if prompt else 0


# -- figures --------------------------------------------------------------------------

# What a cached input token costs against a fresh one: a tenth, as Anthropic's cache reads
# and OpenAI's newer models price them (a quarter or a half for older OpenAI models).
CACHED_PRICE = 0.1


class ModeSummary(CamelModel):
    """The row of the table for one mode."""

    mode: str
    label: str
    problems: int  # in the selection
    finished: int
    pass_after: list[float | None]  # cumulative pass rate after attempt 1..4; None: beyond the mode
    passed_after: list[int | None]
    reflections: int
    calls: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0
    lesson_tokens: int = 0  # of the tokens, those of the tasks' outcome reflections
    solved: int  # problems passed at any attempt
    cost_usd: float | None
    wall_s: float
    first_replies: int  # problems whose first attempt's reply is on record
    first_applied: int
    replies: int
    replies_applied: int
    repeats_asked_again: int
    repeats_counted: int
    formats_asked: dict[str, int]

    @property
    def tokens_per_solved(self) -> float | None:
        """Input and output tokens of every finished problem over the problems solved."""
        return (self.input_tokens + self.output_tokens) / self.solved if self.solved else None

    @property
    def tokens_per_solved_cached(self) -> float | None:
        """The same, with the input a prompt cache serves counted at CACHED_PRICE."""
        if not self.solved:
            return None
        fresh = self.input_tokens - self.cached_tokens
        return (fresh + CACHED_PRICE * self.cached_tokens + self.output_tokens) / self.solved

    @property
    def tokens_per_solved_lessons_aside(self) -> float | None:
        """Tokens per solved without the tasks' outcome reflections: what solving cost, the
        lessons written for later tasks aside (a mode without reflexion writes none)."""
        tokens = self.input_tokens + self.output_tokens - self.lesson_tokens
        return tokens / self.solved if self.solved else None

    @property
    def calls_per_solved(self) -> float | None:
        return self.calls / self.solved if self.solved else None


def summarize(results: ResultFile, mode: str, max_attempts: int = 4) -> ModeSummary:
    record = results.modes[mode]
    rows = [record.problems[p] for p in results.selection if p in record.problems]
    total = len(results.selection)
    passed_after: list[int | None] = []
    for k in range(1, max_attempts + 1):
        if k > record.settings.max_attempts:
            passed_after.append(None)
        else:
            passed_after.append(sum(r.passed_at is not None and r.passed_at <= k for r in rows))
    cost: float | None = 0.0
    for r in rows:
        cost = None if cost is None or r.cost_usd is None else cost + r.cost_usd
    return ModeSummary(
        mode=mode,
        label=record.settings.label,
        problems=total,
        finished=len(rows),
        pass_after=[None if n is None else (n / total if total else 0.0) for n in passed_after],
        passed_after=passed_after,
        reflections=sum(r.reflections for r in rows),
        calls=sum(r.calls for r in rows),
        input_tokens=sum(r.input_tokens for r in rows),
        output_tokens=sum(r.output_tokens for r in rows),
        cached_tokens=sum(r.cached_tokens for r in rows),
        lesson_tokens=sum(r.lesson_tokens for r in rows),
        solved=sum(r.passed_at is not None for r in rows),
        cost_usd=cost,
        wall_s=record.wall_s,
        first_replies=sum(r.first_applied is not None for r in rows),
        first_applied=sum(bool(r.first_applied) for r in rows),
        replies=sum(r.replies for r in rows),
        replies_applied=sum(r.replies_applied for r in rows),
        repeats_asked_again=sum(r.repeats_asked_again for r in rows),
        repeats_counted=sum(r.repeats_counted for r in rows),
        formats_asked=_added(r.formats_asked for r in rows),
    )


def _added(counts: Iterable[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for count in counts:
        for key, value in count.items():
            total[key] = total.get(key, 0) + value
    return total
