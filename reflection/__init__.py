"""goldenloop's Reflexion memory: failure digests, verbal reflections and their store.

Usable on its own; it never imports the orchestrator. The names below are its public
surface, each imported when first used; every other module is an implementation detail.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reflection.exports import lazy_exports

if TYPE_CHECKING:
    from reflection.backends import open_store
    from reflection.digest import Digest, make_digest
    from reflection.llm import ChatModel, ChatReply, LiteLLMModel, ModelError
    from reflection.redact import redact
    from reflection.schema import (
        CamelModel,
        FailureCategory,
        FailureContext,
        FailureType,
        Reflection,
        ReflectionDraft,
    )
    from reflection.service import ReflectionService
    from reflection.store import InMemoryReflectionStore, JsonlReflectionStore, ReflectionStore

_HOMES = {
    # the service: generate, save, recall
    "ReflectionService": "reflection.service",
    # the schema
    **dict.fromkeys(("CamelModel", "FailureCategory", "FailureContext", "FailureType", "Reflection",
                     "ReflectionDraft"), "reflection.schema"),
    # the store protocol and its backends
    **dict.fromkeys(("InMemoryReflectionStore", "JsonlReflectionStore", "ReflectionStore"), "reflection.store"),
    "open_store": "reflection.backends",
    # what a reflection is made from, and the models that write one
    "Digest": "reflection.digest",
    "make_digest": "reflection.digest",
    "redact": "reflection.redact",
    **dict.fromkeys(("ChatModel", "ChatReply", "LiteLLMModel", "ModelError"), "reflection.llm"),
}

__getattr__ = lazy_exports(__name__, _HOMES)

__all__ = [
    "CamelModel",
    "ChatModel",
    "ChatReply",
    "Digest",
    "FailureCategory",
    "FailureContext",
    "FailureType",
    "InMemoryReflectionStore",
    "JsonlReflectionStore",
    "LiteLLMModel",
    "ModelError",
    "Reflection",
    "ReflectionDraft",
    "ReflectionService",
    "ReflectionStore",
    "make_digest",
    "open_store",
    "redact",
]
