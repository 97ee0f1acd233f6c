"""ReflectionService: the one object a loop needs to learn from its failures."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from reflection.llm import ChatModel
from reflection.prompts import format_for_prompt
from reflection.redact import redact_data
from reflection.schema import FailureContext, Reflection, utc_now
from reflection.store import ReflectionStore


class ReflectionService:
    """Generate, store and recall reflections for retries.

    `model=None` (or `use_llm=False`) makes every reflection heuristic: no tokens spent.
    """

    def __init__(
        self,
        store: ReflectionStore,
        model: ChatModel | None = None,
        *,
        use_llm: bool = True,
        timeout_s: float = 30.0,
        max_per_retry: int = 3,
        template: str | None = None,  # the project's own reflection question
    ) -> None:
        self.store = store
        self.model = model if use_llm else None
        self.timeout_s = timeout_s
        self.max_per_retry = max_per_retry
        self.template = template

    @property
    def location(self) -> str | None:
        """Where the reflections are kept (a file), or None when only in memory."""
        return self.store.location

    async def generate(self, ctx: FailureContext, previous: Sequence[Reflection] | None = None) -> Reflection:
        """A reflection on one failed attempt; never raises for model trouble.

        `previous`: the subtask's earlier reflections when the caller knows them (it
        saves reading the store); None: read from the store.
        """
        # Only a failed attempt gets here: a run that passes never pays for this import.
        from reflection.generate import generate_reflection

        if previous is None:
            previous = self.recent(ctx.subtask_id)
        return await generate_reflection(
            ctx, self.model, timeout_s=self.timeout_s, previous=previous, template=self.template
        )

    def save(self, reflection: Reflection) -> Reflection:
        """Redact once more and fit the limits (a caller may have built the record
        itself), then append it. The text is redacted before it is cut (`refitted`)."""
        clean = Reflection.model_validate(redact_data(reflection.refitted().to_dict()))
        self.store.append(clean)
        return clean

    async def reflect(self, ctx: FailureContext, previous: Sequence[Reflection] | None = None) -> Reflection:
        """Generate and save: the usual step after a failed attempt."""
        return self.save(await self.generate(ctx, previous))

    def recent(self, subtask_id: str, limit: int | None = None) -> list[Reflection]:
        """The subtask's last reflections, newest first (default: max_per_retry)."""
        return self.store.recent(subtask_id, limit or self.max_per_retry)

    @staticmethod
    def format_for_prompt(reflections: Sequence[Reflection]) -> str:
        return format_for_prompt(reflections)

    def prune(self, retention_days: float) -> int:
        """Drop reflections older than `retention_days`; returns how many went."""
        return self.store.prune(utc_now() - timedelta(days=retention_days))
