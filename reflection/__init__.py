"""goldenloop's Reflexion memory: failure digests, verbal reflections and their store.

Usable on its own; it never imports the orchestrator. The names below are its public
surface (docs/REFLEXION.md): the service, the schema, the store protocol and its
backends, the prompt's words, and the task reflection SPI. Each is imported from its
home module when first used, so `import reflection` loads no model client (litellm) and
no database driver; every other module is an implementation detail.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reflection.exports import lazy_exports

if TYPE_CHECKING:
    from reflection.backends import open_store
    from reflection.classify import classify
    from reflection.digest import Digest, make_digest
    from reflection.llm import ChatModel, ChatReply, LiteLLMModel, ModelError
    from reflection.prompts import format_for_prompt, reflection_messages
    from reflection.redact import redact
    from reflection.schema import (
        CamelModel,
        FailureCategory,
        FailureContext,
        FailureStage,
        FailureType,
        Reflection,
        ReflectionDraft,
    )
    from reflection.service import ReflectionService
    from reflection.store import InMemoryReflectionStore, JsonlReflectionStore, ReflectionStore
    from reflection.task_reflection import TaskReflection, TaskReflectionInput, task_identity
    from reflection.task_reflector import TaskReflector
    from reflection.task_store import InMemoryTaskReflectionStore, JsonTaskReflectionStore, TaskReflectionStore
    from reflection.task_strategy import LlmReflectionStrategy, ReflectionStrategy

_HOMES = {
    # the service: generate, save, recall, format_for_prompt
    "ReflectionService": "reflection.service",
    # the schema
    **dict.fromkeys(("CamelModel", "FailureCategory", "FailureContext", "FailureStage", "FailureType",
                     "Reflection", "ReflectionDraft"), "reflection.schema"),
    # the store protocol and its backends
    **dict.fromkeys(("InMemoryReflectionStore", "JsonlReflectionStore", "ReflectionStore"), "reflection.store"),
    "open_store": "reflection.backends",
    # the words: the reflection prompt and the block a retry prompt carries
    **dict.fromkeys(("format_for_prompt", "reflection_messages"), "reflection.prompts"),
    # what a reflection is made from, the heuristic, and the models that write one
    "Digest": "reflection.digest",
    "make_digest": "reflection.digest",
    "classify": "reflection.classify",
    "redact": "reflection.redact",
    **dict.fromkeys(("ChatModel", "ChatReply", "LiteLLMModel", "ModelError"), "reflection.llm"),
    # task reflection (notes an accepted task leaves for its next run): store, strategy, reflector
    **dict.fromkeys(("TaskReflection", "TaskReflectionInput", "task_identity"), "reflection.task_reflection"),
    **dict.fromkeys(("InMemoryTaskReflectionStore", "JsonTaskReflectionStore", "TaskReflectionStore"),
                    "reflection.task_store"),
    **dict.fromkeys(("LlmReflectionStrategy", "ReflectionStrategy"), "reflection.task_strategy"),
    "TaskReflector": "reflection.task_reflector",
}

__getattr__ = lazy_exports(__name__, _HOMES)

__all__ = [
    "CamelModel",
    "ChatModel",
    "ChatReply",
    "Digest",
    "FailureCategory",
    "FailureContext",
    "FailureStage",
    "FailureType",
    "InMemoryReflectionStore",
    "InMemoryTaskReflectionStore",
    "JsonTaskReflectionStore",
    "JsonlReflectionStore",
    "LiteLLMModel",
    "LlmReflectionStrategy",
    "ModelError",
    "Reflection",
    "ReflectionDraft",
    "ReflectionService",
    "ReflectionStore",
    "ReflectionStrategy",
    "TaskReflection",
    "TaskReflectionInput",
    "TaskReflectionStore",
    "TaskReflector",
    "classify",
    "format_for_prompt",
    "make_digest",
    "open_store",
    "redact",
    "reflection_messages",
    "task_identity",
]
