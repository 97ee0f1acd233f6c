"""The API key a model needs, told without litellm where that is cheap.

Importing litellm costs seconds and a hundred MiB, too much for refusing a run whose key
is unset. For the providers below, litellm's own `validate_environment` asks for exactly
one variable (checked against litellm 1.83: a variable set, even empty, counts as set);
any other model is left to litellm (`reflection.llm.missing_api_key`).
"""

from __future__ import annotations

import os

# provider prefix -> the one variable litellm asks for
_BY_PREFIX = {
    "openai/": "OPENAI_API_KEY",
    "anthropic/": "ANTHROPIC_API_KEY",
    "groq/": "GROQ_API_KEY",
    "mistral/": "MISTRAL_API_KEY",
    "deepseek/": "DEEPSEEK_API_KEY",
    "openrouter/": "OPENROUTER_API_KEY",
    "xai/": "XAI_API_KEY",
    "together_ai/": "TOGETHERAI_API_KEY",
    "fireworks_ai/": "FIREWORKS_AI_API_KEY",
    "cohere/": "COHERE_API_KEY",
    "perplexity/": "PERPLEXITYAI_API_KEY",
    "huggingface/": "HUGGINGFACE_API_KEY",
}

# Bare OpenAI names litellm maps to OpenAI's key. Only exact names: for others (a dated
# variant, a preview) litellm's answer depends on its model list, so it is asked.
_OPENAI_NAMES = frozenset({
    "gpt-3.5-turbo", "gpt-4", "gpt-4-turbo", "gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini",
    "gpt-4.1-nano", "gpt-5", "gpt-5-mini", "o1", "o3", "o3-mini", "o4-mini",
})


def known_key(model: str) -> str | None:
    """The variable `model` needs if its provider is in the tables above, else None."""
    if model in _OPENAI_NAMES:
        return "OPENAI_API_KEY"
    for prefix, variable in _BY_PREFIX.items():
        if model.startswith(prefix):
            return variable
    return None


def key_is_set(variable: str) -> bool:
    return variable in os.environ
