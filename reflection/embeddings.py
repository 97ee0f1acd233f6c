"""Embedding calls for ranking lessons by meaning (`memory.embeddingModel`).

Any litellm embedding model works, including the scripted one (docs/SCRIPTED_MODEL.md).
Texts are redacted before they leave the machine, as every prompt is. litellm is
imported on the first call only: a project without an embedding model never pays for it.
"""

from __future__ import annotations

from collections.abc import Callable

from reflection.redact import redact

Embedder = Callable[[list[str]], list[list[float]]]


def litellm_embedder(model: str, *, timeout_s: float = 60.0, api_base: str | None = None,
                     api_key_env: str | None = None) -> Embedder:
    """A function that embeds a batch of texts with `model`, in order, at `api_base` when
    given (the key read from `api_key_env` at each call, as for chat calls)."""
    from reflection.keys import call_credentials

    def embed(texts: list[str]) -> list[list[float]]:
        from reflection.litellm_setup import SCRIPTED_PREFIX, load_litellm

        if not texts:
            return []
        litellm = load_litellm()
        if model.startswith(SCRIPTED_PREFIX):
            from reflection.scripted import register_scripted_provider

            register_scripted_provider()
        credentials = call_credentials(model, api_base=api_base, api_key_env=api_key_env)
        reply = litellm.embedding(model=model, input=[redact(text) for text in texts], timeout=timeout_s,
                                  **credentials)
        ordered = sorted(reply.data, key=lambda item: item["index"])
        return [list(item["embedding"]) for item in ordered]

    return embed
