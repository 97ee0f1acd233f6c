"""How a task reflection is made: the `ReflectionStrategy` protocol and the model's way.

`LlmReflectionStrategy` asks a `ChatModel` and reads its JSON reply, validated, clamped
and redacted. Reflection is a learning step after the task was accepted, never a gate:
on any model trouble (an error, a timeout, a reply that is not the JSON asked for) it
returns None, and the task stays as it ended.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol, runtime_checkable

import anyio

from reflection.generate import extract_json
from reflection.llm import ChatModel, model_ready
from reflection.redact import redact
from reflection.task_prompts import task_reflection_messages
from reflection.task_reflection import TaskReflection, TaskReflectionInput
from reflection.text import reason_of, reply_items, reply_text

log = logging.getLogger("goldenloop.task_reflection")


@runtime_checkable
class ReflectionStrategy(Protocol):
    """Turns an accepted task into notes for its next run; None: nothing worth keeping."""

    async def reflect(self, given: TaskReflectionInput) -> TaskReflection | None: ...


class LlmReflectionStrategy:
    """The default strategy: one model call with the (possibly project's own) prompt."""

    def __init__(self, model: ChatModel, *, timeout_s: float = 30.0, template: str | None = None) -> None:
        self.model = model
        self.timeout_s = timeout_s
        self.template = template

    async def reflect(self, given: TaskReflectionInput) -> TaskReflection | None:
        messages = [
            {**m, "content": redact(m["content"])}
            for m in task_reflection_messages(given, self.template)
        ]
        try:
            await model_ready(self.model)  # litellm's first import is not the model's slowness
            with anyio.fail_after(self.timeout_s):
                reply = await self.model.complete(messages, timeout=self.timeout_s)
            obj = extract_json(reply.text)
            if obj is None:
                raise ValueError("the reply holds no JSON object")
            return reflection_from_reply(obj)
        except Exception as exc:  # noqa: BLE001 - a learning step must not fail an accepted task
            log.warning("task reflection by %s failed (%s); no notes kept", self.model.name, reason_of(exc))
            return None


def reflection_from_reply(obj: dict[str, Any]) -> TaskReflection:
    """Validate and clamp a model's JSON; ValueError when it has no refined description."""
    refined = reply_text(obj.get("refinedDescription"))
    if not refined:
        raise ValueError("the reply has no refinedDescription")
    return TaskReflection.clamped(
        refined_description=refined,
        refined_expected_output=reply_text(obj.get("refinedExpectedOutput")),
        observations=reply_items(obj.get("observations")),
        suggestions=reply_items(obj.get("suggestions")),
    )



