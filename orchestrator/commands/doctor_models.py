"""`goldenloop doctor`'s lines on models: which model the agent and goldenloop each call,
where, and whether the key each needs is set (never its value).

Told from the config and the environment alone, as the run decides them: an agent that
reads its endpoint from the environment (OPENAI_API_BASE, ...) shares it with goldenloop's
own calls, which litellm makes with the same variables.
"""

from __future__ import annotations

import os

from orchestrator.config import ProjectConfig
from reflection.keys import known_key, missing_keys

Line = tuple[bool, str]
# The variables litellm (and the agents built on it) read a provider's address from.
_ENDPOINT_VARIABLES = {"OPENAI_API_KEY": ("OPENAI_API_BASE", "OPENAI_BASE_URL"),
                       "ANTHROPIC_API_KEY": ("ANTHROPIC_API_BASE", "ANTHROPIC_BASE_URL")}
# Agents that sign in their own way (a login or their own config), not with litellm's keys.
_OWN_SIGN_IN = {"claude-code": "Claude Code", "codex": "Codex"}


def model_lines(config: ProjectConfig) -> list[Line]:
    """The agent's model and goldenloop's own, each with its endpoint and key."""
    executor = config.executor
    lines: list[Line] = []
    if executor.kind == "builtin":
        lines.append(_model_line("the builtin editor's model (also goldenloop's own calls)", config.default_model,
                                 config, own=True))
        return lines
    if executor.kind in _OWN_SIGN_IN:
        name = executor.named_model or "its own default"
        lines.append((True, f"the agent's model: {name}; {_OWN_SIGN_IN[executor.kind]} signs in its own way"))
    elif executor.kind != "command":
        lines.append(_model_line("the agent's model", executor.named_model, config, own=False))
    lines.append(_own_line(config))
    return lines


def _own_line(config: ProjectConfig) -> Line:
    if not (config.reflexion.enabled and config.reflexion.use_llm):
        return True, "goldenloop's own model: none (reflexion.useLLM is false: reflections are heuristic)"
    model = config.reflection_model
    if model is None and config.agent_model_unusable:
        return True, (f"goldenloop's own model: none, so its reflections are heuristic: the agent's "
                      f"{config.agent_model_unusable} (export it for model-written ones)")
    if model is None:
        return True, ("goldenloop's own model: none named, so its reflections are heuristic "
                      "(set reflexion.model, defaultModel or executor.agentModel for model-written ones)")
    return _model_line("goldenloop's own model", model, config, own=True)


def _model_line(who: str, model: str | None, config: ProjectConfig, *, own: bool) -> Line:
    """`own`: a call of goldenloop's, where model.apiBase and model.apiKeyEnv apply; an
    agent reads its endpoint and key from the environment."""
    if model is None:
        return True, f"{who}: its own default"
    base = config.model.api_base if own else None
    key_env = config.model.api_key_env if own else None
    missing = missing_keys(model, api_base=base, api_key_env=key_env)
    if missing:
        aside = "" if own else " here (unless the agent reads it from a .env file)"
        return False, f"{who}: {model} at {_endpoint(model, base)}; needs {', '.join(missing)}, which is not set{aside}"
    key = key_env or known_key(model)
    told = f"{key} is set" if key and os.environ.get(key) is not None else "no key needed"
    return True, f"{who}: {model} at {_endpoint(model, base)}; {told}"


def _endpoint(model: str, api_base: str | None) -> str:
    if api_base:
        return f"{api_base} (model.apiBase)"
    for variable in _ENDPOINT_VARIABLES.get(known_key(model) or "", ()):
        if os.environ.get(variable):
            return f"{os.environ[variable]} ({variable})"
    return "its provider's address"
