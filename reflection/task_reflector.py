"""TaskReflector: the step after a task is accepted, and the notes its next run reads.

It loads the prior notes, asks the strategy, stamps the result (when, and how many
reflections this identity has had) and stores it. The strategy is the only part that
may fail, and it answers None then; a store that cannot be written is the caller's to
report, since it means the notes are lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from reflection.schema import utc_now
from reflection.task_prompts import task_notes_block
from reflection.task_reflection import TaskReflection, TaskReflectionInput, task_identity
from reflection.task_store import TaskReflectionStore

if TYPE_CHECKING:  # the model's strategy loads the reply parsers: only a run that reflects pays
    from reflection.task_strategy import ReflectionStrategy


@dataclass(frozen=True)
class Reflected:
    """One stored task reflection, and whether it is the first for its identity."""

    identity: str
    reflection: TaskReflection
    is_first: bool


class TaskReflector:
    def __init__(self, store: TaskReflectionStore, strategy: ReflectionStrategy) -> None:
        self.store = store
        self.strategy = strategy

    def notes_for(self, description: str) -> str:
        """The Task Improvement Notes block for a task with this description, or ''."""
        return task_notes_block(self.store.retrieve(task_identity(description)))

    async def reflect(self, description: str, expected_output: str, output: str) -> Reflected | None:
        """Reflect on an accepted task and store the notes; None when the strategy made none."""
        identity = task_identity(description)
        prior = self.store.retrieve(identity)
        given = TaskReflectionInput(description, expected_output, output, prior)
        made = await self.strategy.reflect(given)
        if made is None:
            return None
        # Clamped again: a custom strategy may have built the record itself.
        stamped = TaskReflection.clamped(
            **{**dict(made), "reflected_at": utc_now(), "run_count": (prior.run_count if prior else 0) + 1}
        )
        self.store.store(identity, stamped)
        return Reflected(identity, stamped, prior is None)
