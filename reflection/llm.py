"""One client for every model call: LiteLLM behind a small protocol.

`LiteLLMModel` calls `litellm.acompletion` with litellm's own retries switched off and
retries here instead, only for transient errors (rate limit, timeout, connection, 5xx),
with exponential backoff, jitter and the provider's Retry-After. It records tokens and
cost per call and in running totals; a price litellm does not know is `None`, never 0.

`litellm` is imported lazily (it costs seconds, and left to itself it fetches a price
list from the network and loads a `.env` file): `import reflection.llm` stays cheap.

The scripted model (`scripted/<path to a JSON script>`, offline) lives in
reflection/scripted.py; `LiteLLMModel` registers it on first use.
"""

from __future__ import annotations

import email.utils
import functools
import logging
import math
import random
import re
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import anyio

from reflection.keys import call_credentials, missing_keys
from reflection.litellm_setup import SCRIPTED_PREFIX, load_litellm, on_home_loop
from reflection.meter import Meter
from reflection.text import english_list

if TYPE_CHECKING:  # only for annotations: importing litellm costs seconds
    from litellm import ModelResponse

logger = logging.getLogger("goldenloop.llm")

ErrorKind = Literal[
    "auth",
    "bad_request",
    "context_window",
    "rate_limit",
    "timeout",
    "connection",
    "server",
    "not_found",
    "other",
]
TRANSIENT_KINDS: frozenset[str] = frozenset({"rate_limit", "timeout", "connection", "server"})

_MAX_BACKOFF_S = 30.0
_MAX_RETRY_AFTER_S = 60.0  # a provider asking for longer is better treated as a failure
_DETAIL_CHARS = 200

# Indirection so tests can observe the delays between attempts without waiting them out.
_sleep: Callable[[float], Any] = anyio.sleep

_warm_lock = threading.Lock()
_warm = False  # litellm's first call paid once (load_warm_litellm)
_preload_lock = threading.Lock()
_preload: threading.Thread | None = None


# ---------------------------------------------------------------------------
# Public types


@dataclass(frozen=True)
class ChatReply:
    """A model's answer to one `complete` call, with what it cost."""

    text: str
    model: str
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None  # None: the price is unknown (never 0 unless truly free)
    latency_s: float  # what the caller waited, retries and backoff included
    # Why the model stopped: "stop", "length" (cut at the output limit), ...; None: not said.
    finish_reason: str | None = None
    # Input tokens the provider's prompt cache served (priced lower, in cost_usd already);
    # None: the provider did not say.
    cached_tokens: int | None = None


class ModelError(Exception):
    """A model call failed for good; `transient` says whether a later call might succeed."""

    def __init__(
        self,
        message: str,
        *,
        kind: ErrorKind = "other",
        transient: bool | None = None,
        model: str = "",
        attempts: int = 1,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        # Derived from the kind unless a caller (a test double, say) states it.
        self.transient: bool = kind in TRANSIENT_KINDS if transient is None else transient
        self.model = model
        self.attempts = attempts
        # How long the provider asked to wait, when it said so: past a minute it is a usage
        # window (hours, often), which a run waits out rather than fails on.
        self.retry_after_s = retry_after_s


@runtime_checkable
class ChatModel(Protocol):
    """What the reflection service and the loop need from a model."""

    name: str

    async def complete(
        self,
        messages: list[dict[str, str]],
        *,
        timeout: float | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,  # None: the provider's default
    ) -> ChatReply: ...


def load_warm_litellm() -> ModuleType:
    """litellm, imported (`load_litellm`) and warmed up: its first call imports dozens of
    modules more (the tokenizer, provider configs), paid here by one offline call through
    the scripted provider rather than inside the first real call's timeout."""
    global _warm
    litellm = load_litellm()
    with _warm_lock:
        if not _warm:
            _warm = True
            try:
                _warm_up(litellm)
            except Exception:  # noqa: BLE001 - a failed warm-up leaves that cost where it was
                logger.debug("litellm warm-up call failed", exc_info=True)
    return litellm


def _warm_up(litellm: ModuleType) -> None:
    from reflection.scripted import register_scripted_provider, scripted_script

    register_scripted_provider()
    with tempfile.TemporaryDirectory(prefix="goldenloop-warm-up-") as folder:
        model = scripted_script([{"reply": ""}], dir=folder)
        litellm.completion(model=model, messages=[{"role": "user", "content": "."}], max_tokens=1,
                           num_retries=0, max_retries=0)


def preload_litellm() -> None:
    """Start `load_warm_litellm` in a background thread, once per process: a run that knows
    it will call a model calls this early, and its first call finds litellm ready (or waits
    for this same import rather than starting its own)."""
    global _preload
    with _preload_lock:  # not _warm_lock: a warm-up under way must not stall the caller
        if _warm or _preload is not None:
            return
        _preload = threading.Thread(target=_preload_quietly, name="goldenloop-litellm", daemon=True)
    _preload.start()


def _preload_quietly() -> None:
    try:
        load_warm_litellm()
    except Exception:  # noqa: BLE001 - the first model call imports again and reports it
        logger.debug("background import of litellm failed", exc_info=True)


async def model_ready(model: object) -> None:
    """Let `model` finish its one-time set-up (for a LiteLLMModel: importing litellm)
    before a caller starts a clock on it; a model without a `ready` needs none."""
    ready = getattr(model, "ready", None)
    if ready is not None:
        await ready()


# ---------------------------------------------------------------------------
# Error mapping


def error_kind(exc: BaseException) -> ErrorKind:
    """Map an exception from litellm (or our own deadline) to an ErrorKind."""
    # litellm's exception classes subclass openai's; testing the bases also catches an
    # openai error that a provider path lets through unmapped. openai loads with litellm.
    import openai

    litellm = load_litellm()
    if isinstance(exc, litellm.ContextWindowExceededError):
        return "context_window"
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        return "auth"
    if isinstance(exc, openai.NotFoundError):
        return "not_found"
    if isinstance(exc, openai.RateLimitError):
        return "rate_limit"
    # APITimeoutError subclasses APIConnectionError: test it first.
    if isinstance(exc, openai.APITimeoutError | TimeoutError):
        return "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return "connection"
    if isinstance(exc, openai.BadRequestError | openai.UnprocessableEntityError):
        return "bad_request"
    return _kind_from_status(getattr(exc, "status_code", None))


def _kind_from_status(status: object) -> ErrorKind:
    if not isinstance(status, int):
        return "other"
    if status >= 500:
        return "server"
    by_status: dict[int, ErrorKind] = {
        400: "bad_request",
        401: "auth",
        403: "auth",
        404: "not_found",
        408: "timeout",
        413: "context_window",
        422: "bad_request",
        429: "rate_limit",
    }
    return by_status.get(status, "other")


_PHRASES: dict[str, str] = {
    "auth": "refused the credentials",
    "bad_request": "rejected the request",
    "context_window": "cannot take a prompt this long",
    "rate_limit": "is rate limited",
    "timeout": "timed out",
    "connection": "could not be reached",
    "server": "had a server error",
    "not_found": "was not found",
    "other": "failed",
}


def _detail(exc: BaseException) -> str:
    """The first line of the error, without litellm's class-name prefix, bounded."""
    lines = str(exc).strip().splitlines()
    text = re.sub(r"^litellm\.\w+:\s*", "", lines[0] if lines else "")
    text = " ".join(text.split()).rstrip(".")
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 1] + "…"


def _model_error(exc: BaseException, kind: ErrorKind, model: str, attempts: int, timeout: float) -> ModelError:
    detail = _detail(exc) or (f"no reply within {timeout:g} s" if kind == "timeout" else type(exc).__name__)
    tail = f" after {attempts} attempts" if attempts > 1 else ""
    message = f"model {model!r} {_PHRASES[kind]} ({detail}){tail}."
    return ModelError(message, kind=kind, model=model, attempts=attempts, retry_after_s=_retry_after_s(exc))


def _retry_after_s(exc: BaseException) -> float | None:
    """Seconds the provider asked us to wait (Retry-After / retry-after-ms), if any."""
    for headers in (getattr(exc, "headers", None), getattr(getattr(exc, "response", None), "headers", None)):
        if not isinstance(headers, Mapping):
            continue
        lowered = {str(k).lower(): str(v) for k, v in headers.items()}
        if (ms := _as_float(lowered.get("retry-after-ms"))) is not None:
            return max(ms / 1000.0, 0.0)
        if (value := lowered.get("retry-after")) is not None:
            return _parse_retry_after(value)
    return None


def _as_float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _parse_retry_after(value: str) -> float | None:
    """Retry-After is either delta-seconds or an HTTP date."""
    if (seconds := _as_float(value)) is not None:
        return max(seconds, 0.0)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - datetime.now(UTC)).total_seconds(), 0.0)


def _retry_delay(attempt: int, backoff_s: float, retry_after: float | None) -> float:
    """Exponential backoff with equal jitter; a Retry-After (capped) is a floor."""
    base = min(backoff_s * 2.0 ** (attempt - 1), _MAX_BACKOFF_S)
    delay = base / 2 + random.uniform(0, base / 2)
    if retry_after is not None:
        delay = max(delay, min(retry_after, _MAX_RETRY_AFTER_S))
    return delay


# ---------------------------------------------------------------------------
# The LiteLLM-backed model


class LiteLLMModel:
    """A ChatModel for any litellm model name, with our own retries and accounting."""

    def __init__(
        self,
        name: str,
        *,
        timeout: float = 120.0,
        max_attempts: int = 3,
        backoff_s: float = 1.0,
        on_call: Callable[[ChatReply], None] | None = None,
        temperature: float | None = None,
        api_base: str | None = None,
        api_key_env: str | None = None,
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        self.name = name
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.backoff_s = max(backoff_s, 0.0)
        self.on_call = on_call
        self.temperature = temperature  # a call's own temperature wins over this default
        # Where the server is (vLLM, llama.cpp, Ollama, a gateway) and the variable holding
        # its key: the key itself is read at each call and never kept, shown or logged.
        self.api_base = api_base
        self.api_key_env = api_key_env
        self.meter = Meter()  # every call this client made

    def __repr__(self) -> str:
        return f"LiteLLMModel({self.name!r})"

    async def ready(self) -> ModuleType:
        """litellm, imported and warmed up (`load_warm_litellm`, in a worker thread: it takes
        seconds and must not stall the event loop), and set up for this model.

        Callers with a clock of their own (a reflection's timeout) await this first, so the
        import is never counted as the model's slowness.
        """
        # A cancelled caller (Ctrl-C, the time budget) does not wait for the import to end.
        litellm: ModuleType = await anyio.to_thread.run_sync(load_warm_litellm, abandon_on_cancel=True)
        if self.name.startswith(SCRIPTED_PREFIX):
            from reflection.scripted import register_scripted_provider

            register_scripted_provider()
        return litellm

    async def complete(
        self,
        messages: list[dict[str, str]],
        *,
        timeout: float | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatReply:
        """Ask the model; retry transient errors; raise ModelError when it cannot answer.

        The timeout and the latency start once litellm is imported (`ready`).
        """
        litellm = await self.ready()
        limit = timeout if timeout is not None else self.timeout
        started = time.perf_counter()
        options: dict[str, Any] = {"max_tokens": max_tokens}
        if temperature is not None or self.temperature is not None:
            options["temperature"] = temperature if temperature is not None else self.temperature
        response = await self._with_retries(litellm, messages, limit, options)
        reply = self._reply(litellm, response, time.perf_counter() - started)
        self._record(reply)
        return reply

    async def _with_retries(
        self, litellm: ModuleType, messages: list[dict[str, str]], limit: float, options: dict[str, Any]
    ) -> ModelResponse:
        attempt = 1
        while True:
            try:
                return await self._attempt(litellm, messages, limit, options)
            except Exception as exc:  # cancellation is a BaseException and passes through
                kind, retry_after = error_kind(exc), _retry_after_s(exc)
                window = retry_after is not None and retry_after > _MAX_RETRY_AFTER_S  # a usage window
                if kind not in TRANSIENT_KINDS or attempt >= self.max_attempts or window:
                    raise _model_error(exc, kind, self.name, attempt, limit) from exc
                delay = _retry_delay(attempt, self.backoff_s, retry_after)
                logger.warning("model %s: %s on attempt %d, retrying in %.2f s", self.name, kind, attempt, delay)
            await _sleep(delay)
            attempt += 1

    async def _attempt(
        self, litellm: ModuleType, messages: list[dict[str, str]], limit: float, options: dict[str, Any]
    ) -> ModelResponse:
        # Our own deadline too: custom providers and some SDK paths ignore litellm's timeout.
        credentials = call_credentials(self.name, api_base=self.api_base, api_key_env=self.api_key_env)
        with anyio.fail_after(limit):
            return await on_home_loop(functools.partial(
                litellm.acompletion, model=self.name, messages=messages, timeout=limit, num_retries=0,
                max_retries=0, **options, **credentials,
            ))

    def _reply(self, litellm: ModuleType, response: ModelResponse, latency_s: float) -> ChatReply:
        choices = getattr(response, "choices", None) or []
        text = (choices[0].message.content if choices else None) or ""
        usage = getattr(response, "usage", None)
        return ChatReply(
            text=text,
            model=self.name,
            input_tokens=getattr(usage, "prompt_tokens", None),
            output_tokens=getattr(usage, "completion_tokens", None),
            cost_usd=self._cost(litellm, response),
            latency_s=latency_s,
            finish_reason=(getattr(choices[0], "finish_reason", None) if choices else None) or None,
            cached_tokens=cached_tokens(usage),
        )

    def _cost(self, litellm: ModuleType, response: ModelResponse) -> float | None:
        """Price from litellm's map: by our model name first, then by the response's own."""
        attempts: list[dict[str, Any]] = [{"model": self.name}, {}]
        for extra in attempts:
            try:
                cost = litellm.completion_cost(completion_response=response, **extra)
            except Exception as exc:  # litellm raises assorted errors for unmapped models
                logger.debug("model %s: no price (%s)", self.name, exc)
                continue
            if isinstance(cost, int | float) and math.isfinite(cost) and cost >= 0:
                return float(cost)
        return None

    def _record(self, reply: ChatReply) -> None:
        self.meter.add(reply)
        if self.on_call is not None:
            try:
                self.on_call(reply)
            except Exception:  # a broken run-log hook must not lose a paid-for reply
                logger.exception("on_call hook failed for model %s", self.name)


def cached_tokens(usage: Any) -> int | None:
    """The input tokens a provider's prompt cache served, as litellm passes them on: OpenAI's
    and OpenAI-compatible servers' `prompt_tokens_details.cached_tokens`, Anthropic's
    `cache_read_input_tokens`; None when the usage says neither."""
    details = getattr(usage, "prompt_tokens_details", None)
    for value in (getattr(details, "cached_tokens", None), getattr(usage, "cache_read_input_tokens", None)):
        if isinstance(value, int) and value >= 0:
            return value
    return None


def missing_api_key(model: str, *, api_base: str | None = None, api_key_env: str | None = None) -> str | None:
    """One sentence naming the unset environment variable `model` needs, or None if none.

    Decided from the provider prefix and the environment alone (reflection/keys.py), never
    by importing litellm: a provider that table does not know is not checked. A local
    endpoint (`api_base` on this machine) or a local provider (ollama/, scripted/) needs
    no key unless `api_key_env` names one.
    """
    missing = missing_keys(model, api_base=api_base, api_key_env=api_key_env)
    if not missing:
        return None
    verb = "is" if len(missing) == 1 else "are"
    return f"model {model!r} needs {english_list(missing)}, which {verb} not set."


def _missing_by_litellm(model: str) -> list[str]:
    """What litellm itself says `model` lacks; only tests compare it with the table."""
    litellm = load_litellm()
    try:
        return list(litellm.validate_environment(model).get("missing_keys") or [])
    except Exception as exc:  # an unknown provider: nothing we can say about its keys
        logger.debug("cannot check the environment for model %s: %s", model, exc)
        return []


def price_known(model: str) -> bool:
    """Whether litellm can price `model` (a scripted model: whether its script has pricing).

    A run with a cost budget refuses to start on a model whose price is unknown, rather
    than spend money it cannot count.
    """
    litellm = load_litellm()
    if model.startswith(SCRIPTED_PREFIX):
        from reflection.scripted import scripted_price_known

        return scripted_price_known(model)
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=model, prompt_tokens=1000, completion_tokens=1000
        )
    except Exception:  # litellm raises for models missing from its price map
        return False
    return prompt_cost + completion_cost > 0


def call_cost(model: str, input_tokens: int, output_tokens: int) -> float | None:
    """What a call of `model` with these token counts costs at litellm's price (a scripted
    model: its script's); None when the price is unknown."""
    if not price_known(model):  # registers a scripted model's price with litellm
        return None
    litellm = load_litellm()
    if model.startswith(SCRIPTED_PREFIX):
        from reflection.scripted import register_scripted_provider

        register_scripted_provider()  # litellm names the provider of a model it prices
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=model, prompt_tokens=input_tokens, completion_tokens=output_tokens
        )
    except Exception as exc:  # litellm raises assorted errors for unmapped models
        logger.debug("model %s: no price (%s)", model, exc)
        return None
    cost = float(prompt_cost) + float(completion_cost)
    return cost if math.isfinite(cost) and cost >= 0 else None


def max_output_tokens(model: str) -> int | None:
    """The most tokens `model` writes in one reply, from litellm's model map; None if unknown."""
    litellm = load_litellm()
    try:
        info = litellm.get_model_info(model)
    except Exception:  # litellm raises for models missing from its map
        return None
    for key in ("max_output_tokens", "max_tokens"):
        value = info.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return None


__all__ = [
    "TRANSIENT_KINDS",
    "ChatModel",
    "ChatReply",
    "ErrorKind",
    "LiteLLMModel",
    "ModelError",
    "call_cost",
    "error_kind",
    "max_output_tokens",
    "load_warm_litellm",
    "missing_api_key",
    "model_ready",
    "preload_litellm",
    "price_known",
]
