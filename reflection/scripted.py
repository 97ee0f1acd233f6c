"""The scripted model: a litellm custom provider that answers from a JSON script.

The model name `scripted/<path to a JSON script>` answers from that script, offline,
through litellm's real call, error and cost paths. The script format is in
docs/SCRIPTED_MODEL.md; `reflection.llm.LiteLLMModel` registers the provider itself.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import tempfile
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

import anyio
import orjson
from pydantic import ConfigDict, Field, ValidationError, field_validator

from reflection.litellm_setup import SCRIPTED_PREFIX, SCRIPTED_PROVIDER, load_litellm
from reflection.schema import CamelModel

if TYPE_CHECKING:  # only for annotations: importing litellm costs seconds
    from litellm import ModelResponse


# ---------------------------------------------------------------------------
# Script format

ScriptErrorKind = Literal[
    "rate_limit", "timeout", "auth", "bad_request", "context_window", "connection", "server", "not_found"
]


class _ScriptPricing(CamelModel):
    model_config = ConfigDict(extra="forbid")

    input_cost_per_token: float = Field(ge=0)
    output_cost_per_token: float = Field(ge=0)
    # What an input token a prompt cache served costs; None: the full input price.
    cached_input_cost_per_token: float | None = Field(default=None, ge=0)


class _ScriptUsage(CamelModel):
    model_config = ConfigDict(extra="forbid")

    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    cached_tokens: int | None = Field(default=None, ge=0)  # reported as the provider's prompt cache


class _ScriptEntry(CamelModel):
    # Unknown keys are errors: a misspelt "reply" would otherwise answer "" silently.
    model_config = ConfigDict(extra="forbid")

    match: str | None = None
    reply: str = ""
    times: int | None = Field(default=1, ge=1)  # null: unlimited
    error: ScriptErrorKind | None = None
    delay: float = Field(default=0.0, ge=0)
    usage: _ScriptUsage | None = None
    retry_after: float | None = Field(default=None, ge=0)
    finish: Literal["stop", "length"] = "stop"  # "length": as if cut at the output limit

    @field_validator("match")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"match is not a valid regular expression: {exc}") from exc
        return value


class _Script(CamelModel):
    model_config = ConfigDict(extra="forbid")

    pricing: _ScriptPricing | None = None
    replies: list[_ScriptEntry] = Field(default_factory=list)
    # Words the scripted embedding model takes to mean the same (see `embed_texts`).
    concepts: list[list[str]] = Field(default_factory=list)
    # As a server with a prompt cache: each reply reports as cached the tokens of its prompt's
    # start that an earlier prompt to this script began with (estimated like the rest).
    prompt_cache: bool = False


EMBEDDING_DIMENSIONS = 64
_WORD = re.compile(r"[a-z0-9]+")


def embed_texts(script: _Script, texts: list[str]) -> list[list[float]]:
    """The scripted embedding model: a normalised bag of words, hashed into a few
    dimensions, with every word of a `concepts` group counted as the group's first word,
    so that a test decides which paraphrases mean the same. Deterministic and offline."""
    same = {word.lower(): group[0].lower() for group in script.concepts for word in group}
    vectors = []
    for text in texts:
        vector = [0.0] * EMBEDDING_DIMENSIONS
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(same.get(word, word).encode(), digest_size=4).digest()
            vector[int.from_bytes(digest, "big") % EMBEDDING_DIMENSIONS] += 1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        vectors.append([v / norm for v in vector])
    return vectors


def scripted_script(
    replies: list[dict[str, Any]],
    *,
    pricing: dict[str, float] | None = None,
    dir: Path | str,  # noqa: A002 - the name callers use
) -> str:
    """Write a script file into `dir` and return its model name `scripted/<abs path>`."""
    body: dict[str, Any] = {"replies": replies}
    if pricing is not None:
        body["pricing"] = pricing
    _Script.model_validate(body)  # fail here, not at the first call
    fd, path = tempfile.mkstemp(prefix="script-", suffix=".json", dir=dir)
    with os.fdopen(fd, "wb") as handle:
        handle.write(orjson.dumps(body, option=orjson.OPT_INDENT_2))
    return SCRIPTED_PREFIX + str(Path(path).resolve())


# ---------------------------------------------------------------------------
# Per-process state

_state_lock = threading.Lock()
_uses: dict[Path, dict[int, int]] = {}  # resolved script path -> entry index -> times used
_registered_prices: dict[str, tuple[float, float, float]] = {}
_prompts: dict[Path, list[str]] = {}  # resolved script path -> the prompts it was sent (promptCache)


def reset_scripted_state() -> None:
    """Forget how often each script entry was used (registered prices stay)."""
    with _state_lock:
        _uses.clear()
        _prompts.clear()


def _load_script(litellm: ModuleType, path: Path) -> _Script:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise litellm.NotFoundError(
            message=f"the script {path} cannot be read: {exc.strerror}", model=str(path), llm_provider=SCRIPTED_PROVIDER
        ) from exc
    try:
        return _Script.model_validate(orjson.loads(raw))
    except (orjson.JSONDecodeError, ValidationError) as exc:
        raise litellm.BadRequestError(
            message=f"the script {path} is not valid: {_script_problem(exc)}",
            model=str(path),
            llm_provider=SCRIPTED_PROVIDER,
        ) from exc


def _script_problem(exc: orjson.JSONDecodeError | ValidationError) -> str:
    """`replies.0.times: Input should be ...` rather than pydantic's multi-line report."""
    if isinstance(exc, orjson.JSONDecodeError):
        return f"not JSON ({exc})"
    problems = [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3]]
    return "; ".join(problems)


def _register_price(litellm: ModuleType, model_name: str, pricing: _ScriptPricing) -> None:
    """Tell litellm the script's price, so completion_cost prices it the normal way."""
    cached = pricing.cached_input_cost_per_token
    price = (pricing.input_cost_per_token, pricing.output_cost_per_token,
             pricing.input_cost_per_token if cached is None else cached)
    with _state_lock:
        if _registered_prices.get(model_name) == price:
            return
        _registered_prices[model_name] = price
    litellm.register_model(
        {
            model_name: {
                "litellm_provider": SCRIPTED_PROVIDER,
                "mode": "chat",
                "input_cost_per_token": price[0],
                "output_cost_per_token": price[1],
                # Without a cached price, cached tokens cost the same (also stops a litellm warning).
                "cache_read_input_token_cost": price[2],
                "cache_creation_input_token_cost": price[0],
            }
        }
    )


def _content_text(content: object) -> str:
    """Message content as text: a string, or the text parts of a multi-part content."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return _content_text(message.get("content"))
    return ""


def _take_entry(litellm: ModuleType, path: Path, script: _Script, text: str) -> _ScriptEntry:
    """The first entry in file order that matches and has uses left; counts the use."""
    with _state_lock:
        used = _uses.setdefault(path, {})
        for index, entry in enumerate(script.replies):
            if entry.times is not None and used.get(index, 0) >= entry.times:
                continue
            if entry.match is not None and re.search(entry.match, text, re.DOTALL) is None:
                continue
            used[index] = used.get(index, 0) + 1
            return entry
    raise litellm.BadRequestError(
        message=f"the script {path} has no reply left for this call",
        model=str(path),
        llm_provider=SCRIPTED_PROVIDER,
    )


def _script_error(litellm: ModuleType, entry: _ScriptEntry, model: str) -> Exception:
    """The litellm exception a real provider would raise for this kind of failure."""
    kind = entry.error
    common: dict[str, Any] = {"message": f"scripted {kind} error", "model": model, "llm_provider": SCRIPTED_PROVIDER}
    if kind == "rate_limit":
        headers = None if entry.retry_after is None else {"retry-after": f"{entry.retry_after:g}"}
        rate_limited: Exception = litellm.RateLimitError(**common, headers=headers)
        return rate_limited
    classes: dict[str, type[Exception]] = {
        "timeout": litellm.Timeout,
        "auth": litellm.AuthenticationError,
        "bad_request": litellm.BadRequestError,
        "context_window": litellm.ContextWindowExceededError,
        "connection": litellm.APIConnectionError,
        "server": litellm.InternalServerError,
        "not_found": litellm.NotFoundError,
    }
    return classes[str(kind)](**common)


def _estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


# ---------------------------------------------------------------------------
# The litellm provider


class _ScriptedCall:
    """One call's plan: which entry answers, and how the response looks."""

    def __init__(self, litellm: ModuleType, model: str, messages: list[dict[str, Any]]) -> None:
        self.litellm = litellm
        self.model = model
        path = Path(model).resolve()
        script = _load_script(litellm, path)
        if script.pricing is not None:
            _register_price(litellm, SCRIPTED_PREFIX + model, script.pricing)
        self.entry = _take_entry(litellm, path, script, _last_user_text(messages))
        self.prompt_text = "\n".join(_content_text(m.get("content")) for m in messages)
        self.cached = _cached_prefix(path, self.prompt_text) if script.prompt_cache else None

    def respond(self, model_response: ModelResponse) -> ModelResponse:
        entry = self.entry
        if entry.error is not None:
            raise _script_error(self.litellm, entry, self.model)
        model_response.choices[0].message.content = entry.reply
        model_response.choices[0].finish_reason = entry.finish
        model_response.model = SCRIPTED_PREFIX + self.model
        usage = entry.usage or _ScriptUsage(
            input_tokens=_estimate_tokens(self.prompt_text), output_tokens=_estimate_tokens(entry.reply)
        )
        cached = usage.cached_tokens if usage.cached_tokens is not None else self.cached
        cached = None if cached is None else min(cached, usage.input_tokens)
        details = {} if cached is None else {"prompt_tokens_details": {"cached_tokens": cached}}
        model_response.usage = self.litellm.Usage(
            prompt_tokens=usage.input_tokens,
            completion_tokens=usage.output_tokens,
            total_tokens=usage.input_tokens + usage.output_tokens,
            **details,
        )
        return model_response


def _cached_prefix(path: Path, prompt: str) -> int:
    """The tokens of `prompt`'s start that an earlier prompt to this script began with."""
    with _state_lock:
        earlier = _prompts.setdefault(path, [])
        shared = max((len(os.path.commonprefix([prompt, e])) for e in earlier), default=0)
        earlier.append(prompt)
    return _estimate_tokens(prompt[:shared]) if shared else 0


def _scripted_handler(litellm: ModuleType) -> object:
    """An instance of a litellm.CustomLLM subclass (built here: litellm loads lazily)."""

    custom_llm: Any = litellm.CustomLLM

    class ScriptedLLM(custom_llm):  # type: ignore[misc]
        def completion(self, model: str, messages: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
            call = _ScriptedCall(litellm, model, messages)
            if call.entry.delay:
                time.sleep(call.entry.delay)
            return call.respond(kwargs["model_response"])

        async def acompletion(self, model: str, messages: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
            call = _ScriptedCall(litellm, model, messages)
            if call.entry.delay:
                await anyio.sleep(call.entry.delay)
            return call.respond(kwargs["model_response"])

        def embedding(self, model: str, input: list, model_response: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: A002
            texts = [str(text) for text in input]
            script = _load_script(litellm, Path(model).resolve())
            vectors = embed_texts(script, texts)
            model_response.data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
            model_response.model = SCRIPTED_PREFIX + model
            tokens = sum(_estimate_tokens(text) for text in texts)
            model_response.usage = litellm.Usage(prompt_tokens=tokens, completion_tokens=0, total_tokens=tokens)
            return model_response

    return ScriptedLLM()


def scripted_price_known(model: str) -> bool:
    """Whether the script behind `scripted/<path>` has pricing (then litellm knows it)."""
    litellm = load_litellm()
    try:
        script = _load_script(litellm, Path(model[len(SCRIPTED_PREFIX) :]).resolve())
    except Exception:  # an unreadable script fails at its first call, not here
        return False
    if script.pricing is None:
        return False
    _register_price(litellm, model, script.pricing)
    return True


def register_scripted_provider() -> None:
    """Make `scripted/<script path>` a litellm model name (idempotent)."""
    litellm = load_litellm()
    with _state_lock:
        if any(item.get("provider") == SCRIPTED_PROVIDER for item in litellm.custom_provider_map):
            return
        litellm.custom_provider_map.append(
            {"provider": SCRIPTED_PROVIDER, "custom_handler": _scripted_handler(litellm)}
        )


__all__ = [
    "ScriptErrorKind",
    "register_scripted_provider",
    "reset_scripted_state",
    "scripted_price_known",
    "scripted_script",
]
