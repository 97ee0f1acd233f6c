"""Reflection triggers: the events, besides a finished output, that the pattern reflects on.

| trigger | configured by | what it does |
| --- | --- | --- |
| `completion` | always on | every complete output (the first and each revision) is scored on the criteria |
| `step_interval` | `reflection_interval=N` | of an agent's reported steps, every N-th step's text is scored too; its issues join the version's, as "after step k: ..." |
| `error` | `reflect_on_error=True` | an agent error (raised, or `AgentOutput.error`) becomes a version scored 0 whose issue is the error, and the next revision is asked to fix it; a step's error becomes an issue. Off: an agent error raises `AgentError` |
| `tool_result` | `reflect_on_tools=[names]` (`"*"`: all) | a watched tool's results are shown to the next revision; a failed one is an issue and keeps the version from being satisfactory |
| `manual` | `request_reflection()` | the next decision to stop (quality met, converged) is overridden once: one more round of reflection and revision |
| `quality_drop` | `quality_drop_threshold=t` | a version scoring more than t below the one before is compared with it: each criterion that fell by more than t becomes an issue, and the next revision starts from the best version even with roll-back off |

A trigger runs when it is listed in `reflection_triggers` or its setting is given; a
listed trigger without its setting is refused (`manual` needs none).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reflection.pattern.agent import AgentOutput, AgentStep, ToolResult
from reflection.pattern.evaluation import ReflectionEvaluation
from reflection.text import one_line

TRIGGERS = ("completion", "step_interval", "error", "tool_result", "manual", "quality_drop")
NOTE_CHARS = 300


@dataclass(frozen=True)
class TriggerSettings:
    """Which triggers run, with their settings."""

    reflection_interval: int | None = None
    reflect_on_error: bool = False
    reflect_on_tools: tuple[str, ...] = ()
    quality_drop_threshold: float | None = None

    @classmethod
    def build(
        cls,
        triggers: Sequence[str],
        *,
        reflection_interval: int | None = None,
        reflect_on_error: bool = False,
        reflect_on_tools: Sequence[str] = (),
        quality_drop_threshold: float | None = None,
    ) -> TriggerSettings:
        """Settings from the pattern's arguments; ValueError for an unknown or unset trigger."""
        unknown = [t for t in triggers if t not in TRIGGERS]
        if unknown:
            raise ValueError(f"unknown reflection trigger {unknown[0]!r}; known: {', '.join(TRIGGERS)}")
        if "step_interval" in triggers and reflection_interval is None:
            raise ValueError("the step_interval trigger needs reflection_interval")
        if "tool_result" in triggers and not reflect_on_tools:
            raise ValueError("the tool_result trigger needs reflect_on_tools (tool names, or '*')")
        if "quality_drop" in triggers and quality_drop_threshold is None:
            raise ValueError("the quality_drop trigger needs quality_drop_threshold")
        if reflection_interval is not None and reflection_interval < 1:
            raise ValueError("reflection_interval must be at least 1")
        if quality_drop_threshold is not None and not 0.0 <= quality_drop_threshold < 1.0:
            raise ValueError("quality_drop_threshold must be within 0..1")
        return cls(
            reflection_interval=reflection_interval,
            reflect_on_error=reflect_on_error or "error" in triggers,
            reflect_on_tools=tuple(reflect_on_tools),
            quality_drop_threshold=quality_drop_threshold,
        )

    def checkpoints(self, output: AgentOutput) -> list[tuple[int, AgentStep]]:
        """The (1-based) steps to score: every `reflection_interval`-th."""
        n = self.reflection_interval
        if not n:
            return []
        return [(i, step) for i, step in enumerate(output.steps, start=1) if i % n == 0 and step.text.strip()]

    def watched(self, output: AgentOutput) -> list[ToolResult]:
        """The results of the tools `tool_result` watches."""
        tools = self.reflect_on_tools
        return [r for r in output.all_tool_results() if "*" in tools or r.tool in tools]

    def step_errors(self, output: AgentOutput) -> list[str]:
        """Issues for steps that hit an error, when `error` is on."""
        if not self.reflect_on_error:
            return []
        return [f"step {i} hit an error: {one_line(s.error, NOTE_CHARS)}"
                for i, s in enumerate(output.steps, start=1) if s.error]

    def dropped(self, before: ReflectionEvaluation, after: ReflectionEvaluation) -> list[str]:
        """Issues naming what fell, when the score dropped by more than the threshold; else []."""
        t = self.quality_drop_threshold
        if t is None or before.overall_score - after.overall_score <= t:
            return []
        fell = [f"{name} fell from {before.criteria_scores[name]:.2f} to {score:.2f} in the last revision; "
                "bring back what the earlier version did right"
                for name, score in after.criteria_scores.items()
                if name in before.criteria_scores and before.criteria_scores[name] - score > t]
        overall = f"the score dropped from {before.overall_score:.2f} to {after.overall_score:.2f}"
        return fell or [f"{overall}; the last revision made the work worse"]


def tool_issues(results: Sequence[ToolResult]) -> list[str]:
    return [f"tool {r.tool} failed: {one_line(r.output, NOTE_CHARS)}" for r in results if not r.ok]
