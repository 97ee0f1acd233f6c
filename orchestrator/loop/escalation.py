"""The escalation packet: what a human needs when the loop gives up on a subtask.

`.openagents/escalations/<taskId>.md` says what was tried, what the reflections
concluded, the last failure (its line, and the error text the retry was given), and what
it cost; `<taskId>.patch` holds the best attempt's
diff, ready for `git apply`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.layout import Layout, safe_name
from orchestrator.loop.plan import Subtask
from orchestrator.tasks import Task
from reflection.fileio import atomic_write
from reflection.meter import Meter
from reflection.redact import redact
from reflection.schema import Reflection
from reflection.text import cut_block

FAILURE_CHARS = 6_000  # of the last failure's text shown in the packet

STOP_WORDS = {
    "max_retries": "every retry was used",
    "plateau": "the attempts stopped improving",
    "oscillation": "the attempts went back and forth",
    "regression": "the last retry made things worse",
    "environment": "the environment stopped it, and no retry can help",
}


@dataclass(frozen=True)
class AttemptSnapshot:
    number: int
    summary: str
    diff: str
    score: float  # share of tests passing; the best attempt has the highest
    failure: str = ""  # what went wrong in full: the digest (assertion, traceback) the retry was told


def best_attempt(snapshots: Sequence[AttemptSnapshot]) -> AttemptSnapshot | None:
    """Highest score; on a tie the later attempt, which had more to learn from."""
    with_changes = [s for s in snapshots if s.diff.strip()]
    return max(with_changes, key=lambda s: (s.score, s.number), default=None)


def write_packet(
    project_dir: Path,
    task: Task,
    subtask: Subtask,
    *,
    snapshots: Sequence[AttemptSnapshot],
    reflections: Sequence[Reflection],
    meter: Meter,
    stop_reason: str = "max_retries",
    fresh: bool = False,
) -> Path:
    folder = Layout(project_dir).escalations
    name = safe_name(task.id)
    packet, patch = folder / f"{name}.md", folder / f"{name}.patch"
    best = best_attempt(snapshots)
    exact = True  # the saved patch applies as it is
    if best is not None:
        shown = redact(best.diff)
        exact = shown == best.diff
        atomic_write(patch, shown.encode())
    text = _markdown(task, subtask, snapshots, reflections, meter, best, patch, stop_reason, fresh, exact)
    atomic_write(packet, redact(text).encode())
    return packet


def _markdown(
    task: Task,
    subtask: Subtask,
    snapshots: Sequence[AttemptSnapshot],
    reflections: Sequence[Reflection],
    meter: Meter,
    best: AttemptSnapshot | None,
    patch: Path,
    stop_reason: str,
    fresh: bool,
    exact: bool = True,
) -> str:
    lines = [
        f"# Escalation: {task.id} — {task.title}",
        "",
        f"Subtask `{subtask.id}`: {subtask.title}",
        _stopped(len(snapshots), stop_reason),
        "",
        "## What was tried",
        *[f"- Attempt {s.number}: {s.summary}" for s in snapshots],
        "",
        "## What the reflections concluded (newest first)",
    ]
    if not reflections:  # retry.fresh's samples are told nothing, so none is reflected on
        lines.append("- (retries were fresh samples (retry.fresh): no reflections)" if fresh
                     else "- (reflexion was off, or no reflection was written)")
    for r in reflections:
        lines.append(f"- Attempt {r.attempt_number} [{r.category.value}]: {r.analysis}")
        lines.append(f"  Suggested: {r.suggestion}")
    lines += ["", "## Last failure", "", *_last_failure(snapshots), "", "## Best attempt"]
    if best is None:
        lines.append("No attempt changed any file.")
    else:
        lines += [
            f"Attempt {best.number} ({best.summary}); its diff is saved as `{patch.name}` next to this file "
            + (f"(apply it with `git apply {patch.name}`)." if exact else
               "with its secrets replaced by `[REDACTED:…]`, so it does not apply as it is: "
               f"`goldenloop history {task.id} --subtask {subtask.id} --patch {best.number} | git apply` "
               "applies the exact one."),
            "",
            "```diff",
            best.diff[:20_000],
            "```",
        ]
    lines += [
        "",
        "## Cost",
        f"- Model calls: {meter.calls_text()}",
        f"- Tokens: {meter.input_tokens} in, {meter.output_tokens} out",
        f"- Cost: {meter.cost_text()}",
        "",
    ]
    return "\n".join(lines)


def _stopped(attempts: int, stop_reason: str) -> str:
    why = STOP_WORDS.get(stop_reason, stop_reason)
    if stop_reason == "environment":
        return (f"The loop stopped after {attempts} attempt(s): {why}. The task is blocked until the environment "
                "is fixed; then `goldenloop reopen` runs it again.")
    return f"The loop gave up after {attempts} attempt(s) ({why}). The task is blocked until a human looks at it."


def _last_failure(snapshots: Sequence[AttemptSnapshot]) -> list[str]:
    """The last attempt's one line, then the error itself: what a human reads first."""
    if not snapshots:
        return ["unknown"]
    last = snapshots[-1]
    if not last.failure.strip() or last.failure.strip() == last.summary.strip():
        return [last.summary]
    fence = "````" if "```" in last.failure else "```"
    return [last.summary, "", fence, cut_block(last.failure.strip("\n"), FAILURE_CHARS), fence]
