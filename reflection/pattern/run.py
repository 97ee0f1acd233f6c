"""One `ReflectionPattern.execute` call's state, kept apart from the pattern's settings so
that one pattern object serves any number of concurrent runs.

The run in progress is found through a context variable: each `execute` (each asyncio
task) sees its own run, also from a callback it calls, while `get_history` outside any run
reads the last run that finished.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field

from reflection.pattern.agent import Agent
from reflection.pattern.convergence import ConvergenceReason, ConvergenceTracker
from reflection.pattern.history import ReflectionVersion
from reflection.schema import Usage

# id(pattern) -> its run in this context; a new dict on every change, never mutated.
_RUNS: ContextVar[dict[int, PatternRun]] = ContextVar("reflection_pattern_runs", default={})  # noqa: B039


@dataclass
class PatternRun:
    """What one run has made so far."""

    agent: Agent | None
    query: str
    tracker: ConvergenceTracker
    versions: list[ReflectionVersion] = field(default_factory=list)
    reason: ConvergenceReason | None = None
    usage: Usage = field(default_factory=Usage)
    step_usage: Usage = field(default_factory=Usage)  # of the version being made
    requested: bool = False  # the manual trigger: one more round

    def spend(self, usage: Usage | None) -> None:
        self.usage = add_usage(self.usage, usage)
        self.step_usage = add_usage(self.step_usage, usage)


def current_run(owner: object) -> PatternRun | None:
    """The run of `owner` in progress in this context, if any."""
    return _RUNS.get().get(id(owner))


def enter_run(owner: object, run: PatternRun) -> object:
    """Make `run` the current one of `owner` here; returns the token `leave_run` takes."""
    return _RUNS.set({**_RUNS.get(), id(owner): run})


def leave_run(token: object) -> None:
    _RUNS.reset(token)  # type: ignore[arg-type]


def add_usage(a: Usage, b: Usage | None) -> Usage:
    """Tokens add up, unknown plus known is the known; a cost unknown on one side stays unknown."""
    if b is None or b == Usage():
        return a
    if a == Usage():
        return b

    def plus(x: int | None, y: int | None) -> int | None:
        return None if x is None and y is None else (x or 0) + (y or 0)

    cost = None if a.cost_usd is None or b.cost_usd is None else a.cost_usd + b.cost_usd
    return Usage(input_tokens=plus(a.input_tokens, b.input_tokens),
                 output_tokens=plus(a.output_tokens, b.output_tokens), cost_usd=cost)


def tokens_of(usage: Usage) -> int | None:
    if usage.input_tokens is None and usage.output_tokens is None:
        return None
    return (usage.input_tokens or 0) + (usage.output_tokens or 0)
