"""`RepoReport`: one repository's share of a run, and the summary JSON written from it.

Its own module so that `do-one-task`, which writes the same summary, does not import the
overnight engine (and its worktrees) to do so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.loop.outcome import TaskOutcome
from orchestrator.session import EXIT_DONE


@dataclass
class RepoReport:
    project_dir: Path
    run_id: str
    outcomes: list[TaskOutcome] = field(default_factory=list)
    stop_reason: str = ""
    refused: str | None = None
    exit_code: int = EXIT_DONE
    started: bool = True  # False: the run's budget ended before this repository's turn

    def summary(self) -> dict:
        return {
            "runId": self.run_id,
            "projectDir": str(self.project_dir),
            "stopReason": self.stop_reason,
            "started": self.started,
            "refused": self.refused,
            "tasks": [
                {
                    "taskId": o.task_id,
                    "outcome": o.status,
                    "reason": o.reason,
                    "verdict": o.verdict,  # pass-to-pass, fail-to-pass, the tests named (judging/verdict.py)
                    "attempts": o.attempts,
                    "reflections": o.reflections,
                    "commits": o.commits,
                    **o.meter.as_dict(),
                    "durationS": round(o.duration_s, 2),
                }
                for o in self.outcomes
            ],
        }
