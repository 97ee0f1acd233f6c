"""The API key a model needs, told without litellm.

Importing litellm costs seconds and a hundred MiB, too much for refusing a run whose key
is unset, so the decision is this module's own: a table of provider prefixes and bare
model names. For the providers of `_BY_PREFIX` and the names of `_OPENAI_NAMES`,
litellm's own `validate_environment` asks for exactly that one variable (checked against
litellm 1.83: a variable set, even empty, counts as set). A provider in no table is not
checked: its first call says what is wrong.

It also says what credentials a call passes (`call_credentials`): the key named by
`model.apiKeyEnv`, read at call time, or a placeholder for a local server that needs none.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from urllib.parse import urlsplit

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

# Prefixes whose key is one variable, though litellm asks for more (azure also wants a base
# URL and an API version, which a config may give otherwise; gemini takes either name).
_KEY_ONLY = {"azure/": "AZURE_API_KEY", "azure_ai/": "AZURE_AI_API_KEY", "gemini/": "GEMINI_API_KEY"}
_ALSO_ACCEPTED = {"GEMINI_API_KEY": ("GOOGLE_API_KEY",)}

# Bare OpenAI names litellm maps to OpenAI's key, exactly (litellm is asked about these in a test).
_OPENAI_NAMES = frozenset({
    "gpt-3.5-turbo", "gpt-4", "gpt-4-turbo", "gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini",
    "gpt-4.1-nano", "gpt-5", "gpt-5-mini", "o1", "o3", "o3-mini", "o4-mini",
})
# Bare name families: a dated variant or a preview goes to the same provider.
_BARE_FAMILIES = (
    (("gpt-", "chatgpt-", "o1-", "o3-", "o4-"), "OPENAI_API_KEY"),
    (("claude-",), "ANTHROPIC_API_KEY"),
)

# Servers on the user's machine, or offline: no key at all.
KEYLESS_PREFIXES = ("scripted/", "ollama/", "ollama_chat/", "lm_studio/", "hosted_vllm/", "llamafile/")

# Bedrock signs with AWS credentials, which may come from any of these or from ~/.aws.
_AWS_SOURCES = ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
AWS_KEYS = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]

# What an OpenAI-compatible client is given when the local server wants no key: the
# OpenAI SDK refuses to start a call with no key at all.
LOCAL_PLACEHOLDER_KEY = "sk-no-key-needed"


def known_key(model: str) -> str | None:
    """The variable `model` needs if its provider is in the tables above, else None."""
    if model in _OPENAI_NAMES:
        return "OPENAI_API_KEY"
    for prefix, variable in (_BY_PREFIX | _KEY_ONLY).items():
        if model.startswith(prefix):
            return variable
    if "/" in model:
        return None
    for prefixes, variable in _BARE_FAMILIES:
        if model.startswith(prefixes):
            return variable
    return None


def key_is_set(variable: str) -> bool:
    return variable in os.environ


def is_local_endpoint(api_base: str | None) -> bool:
    """Whether `api_base` is a server on this machine (localhost, 127.0.0.0/8, ::1)."""
    if not api_base:
        return False
    host = (urlsplit(api_base).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def needs_no_key(model: str, api_base: str | None) -> bool:
    """A local endpoint or a keyless provider: no key to check and none to require."""
    return model.startswith(KEYLESS_PREFIXES) or is_local_endpoint(api_base)


def missing_keys(model: str, *, api_base: str | None = None, api_key_env: str | None = None) -> list[str]:
    """The unset variables `model` needs; [] when none, or when its provider is unknown."""
    if api_key_env:  # the user named the variable: it is the one that must hold the key
        return [] if os.environ.get(api_key_env) else [api_key_env]
    if needs_no_key(model, api_base):
        return []
    if model.startswith("bedrock/"):
        has_aws = any(key_is_set(v) for v in _AWS_SOURCES) or (Path.home() / ".aws" / "credentials").is_file()
        return [] if has_aws else list(AWS_KEYS)
    variable = known_key(model)
    if variable is None or any(key_is_set(v) for v in (variable, *_ALSO_ACCEPTED.get(variable, ()))):
        return []
    return [variable]


def call_credentials(model: str, *, api_base: str | None = None, api_key_env: str | None = None) -> dict[str, str]:
    """The `api_base` and `api_key` arguments of one litellm call, read now (never stored).

    Nothing for the offline scripted model; the configured key, if any; a placeholder for
    a local server when no key is configured; otherwise litellm's own lookup by provider.
    """
    if model.startswith("scripted/"):
        return {}
    options = {"api_base": api_base} if api_base else {}
    key = os.environ.get(api_key_env) if api_key_env else None
    if key:
        options["api_key"] = key
    elif api_base and is_local_endpoint(api_base):
        options["api_key"] = LOCAL_PLACEHOLDER_KEY
    return options
