"""Task reflection: what an accepted task taught about its own instructions.

Unlike a `Reflection` (one failed attempt, read by the next retry of the same subtask),
a `TaskReflection` is written once a task is accepted and read by later runs of a task
with the same identity: the hex SHA-256 of its description. The description is the
task's meaning, so two tasks that say the same thing share their notes, and a task that
is reworded starts afresh. The task itself is never changed: the notes are only shown
before it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import Field, field_serializer

from reflection.schema import CamelModel, fit_text, utc_now

# Sizes a note keeps: enough to steer a prompt, too small to crowd out the task itself.
REFINED_CHARS = 2_000  # refinedDescription, refinedExpectedOutput
NOTE_CHARS = 300  # one observation or suggestion
MAX_NOTES = 5  # observations, and suggestions


def task_identity(description: str) -> str:
    """The key of a task's notes: same description, same key, in any process."""
    return hashlib.sha256(description.encode("utf-8")).hexdigest()


class TaskReflection(CamelModel):
    """The notes a task leaves for its next run; `runCount` counts reflections on it."""

    refined_description: str
    refined_expected_output: str = ""
    observations: list[str] = Field(default_factory=list)
    suggestions: list[str] = Field(default_factory=list)
    reflected_at: datetime = Field(default_factory=utc_now)
    run_count: int = Field(default=1, ge=1)

    @field_serializer("reflected_at")
    def _iso_utc(self, value: datetime) -> str:
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")

    @classmethod
    def clamped(cls, **fields: Any) -> TaskReflection:
        """A reflection within the size limits, its text redacted before it is cut
        (`fit_text`), whoever wrote it: a model, a custom strategy, another tool."""
        reflection = cls(**fields)
        return reflection.model_copy(
            update={
                "refined_description": fit_text(reflection.refined_description, REFINED_CHARS),
                "refined_expected_output": fit_text(reflection.refined_expected_output, REFINED_CHARS),
                "observations": _fit_notes(reflection.observations),
                "suggestions": _fit_notes(reflection.suggestions),
            }
        )


def _fit_notes(notes: list[str]) -> list[str]:
    return [fit_text(note, NOTE_CHARS) for note in notes if note.strip()][:MAX_NOTES]


@dataclass(frozen=True)
class TaskReflectionInput:
    """What a strategy reflects on: the task as written, what it produced, the last notes."""

    description: str
    expected_output: str  # the acceptance criteria, as the task states them ("" if none)
    output: str  # the accepted work (for a coding task: its commits' diff)
    prior: TaskReflection | None = None

    @property
    def identity(self) -> str:
        return task_identity(self.description)
