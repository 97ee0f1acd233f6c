"""The model client: scripted replies through litellm, retries, errors, accounting, env."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from reflection import llm, scripted
from reflection.llm import (
    ChatModel,
    ChatReply,
    LiteLLMModel,
    ModelError,
    missing_api_key,
)
from reflection.scripted import reset_scripted_state, scripted_script

REPO_ROOT = Path(__file__).resolve().parents[2]
PRICING = {"inputCostPerToken": 0.000001, "outputCostPerToken": 0.000002}


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


@pytest.fixture(autouse=True)
def _fresh_scripts() -> None:
    reset_scripted_state()


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the backoff delays between attempts instead of waiting them out."""
    recorded: list[float] = []

    async def fake_sleep(delay: float) -> None:
        recorded.append(delay)

    monkeypatch.setattr(llm, "_sleep", fake_sleep)
    return recorded


# --- the scripted provider, through litellm.acompletion ---------------------------------


@pytest.mark.anyio
async def test_replies_come_in_file_order_then_run_out(tmp_path: Path) -> None:
    name = scripted_script([{"reply": "first"}, {"reply": "second"}], dir=tmp_path)
    model = LiteLLMModel(name, backoff_s=0.001)

    assert (await model.complete(user("a"))).text == "first"
    assert (await model.complete(user("b"))).text == "second"
    with pytest.raises(ModelError) as caught:
        await model.complete(user("c"))

    assert caught.value.kind == "bad_request"
    assert not caught.value.transient
    assert "has no reply left for this call" in str(caught.value)
    assert name.removeprefix("scripted/") in str(caught.value)


@pytest.mark.anyio
async def test_match_searches_the_last_user_message_across_lines(tmp_path: Path) -> None:
    name = scripted_script(
        [
            {"match": "mypy", "reply": "types", "times": None},
            {"match": "FAILED.*assert", "reply": "tests", "times": None},
            {"reply": "fallback", "times": None},
        ],
        dir=tmp_path,
    )
    model = LiteLLMModel(name)
    messages = [
        {"role": "system", "content": "You fix mypy and pytest failures."},
        {"role": "user", "content": "old question about mypy"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "pytest said:\nFAILED test_x\n  assert 1 == 2"},
    ]

    assert (await model.complete(messages)).text == "tests"
    assert (await model.complete(user("error: mypy found 2 errors"))).text == "types"
    assert (await model.complete(user("nothing matches"))).text == "fallback"


@pytest.mark.anyio
async def test_times_limits_an_entry_and_null_means_unlimited(tmp_path: Path) -> None:
    name = scripted_script([{"reply": "twice", "times": 2}, {"reply": "always", "times": None}], dir=tmp_path)
    model = LiteLLMModel(name)

    texts = [(await model.complete(user(str(i)))).text for i in range(5)]

    assert texts == ["twice", "twice", "always", "always", "always"]


@pytest.mark.anyio
async def test_reset_scripted_state_starts_a_script_over(tmp_path: Path) -> None:
    name = scripted_script([{"reply": "only once"}], dir=tmp_path)
    model = LiteLLMModel(name)
    await model.complete(user("x"))

    reset_scripted_state()

    assert (await model.complete(user("x"))).text == "only once"


@pytest.mark.anyio
async def test_usage_and_cost_follow_the_script_pricing(tmp_path: Path) -> None:
    name = scripted_script(
        [{"reply": "done", "usage": {"inputTokens": 100, "outputTokens": 20}}], pricing=PRICING, dir=tmp_path
    )

    reply = await LiteLLMModel(name).complete(user("fix it"))

    assert (reply.text, reply.model, reply.input_tokens, reply.output_tokens) == ("done", name, 100, 20)
    assert reply.cost_usd == pytest.approx(100 * 0.000001 + 20 * 0.000002)
    assert reply.latency_s >= 0


@pytest.mark.anyio
async def test_without_pricing_cost_is_unknown_and_tokens_are_estimated(tmp_path: Path) -> None:
    name = scripted_script([{"reply": "y" * 8}], dir=tmp_path)

    reply = await LiteLLMModel(name).complete(user("x" * 40))

    assert reply.cost_usd is None
    assert (reply.input_tokens, reply.output_tokens) == (10, 2)


@pytest.mark.anyio
async def test_relative_script_path_resolves_against_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = {"pricing": PRICING, "replies": [{"reply": "rel", "usage": {"inputTokens": 10, "outputTokens": 5}}]}
    (tmp_path / "rel.json").write_bytes(orjson.dumps(script))
    monkeypatch.chdir(tmp_path)

    reply = await LiteLLMModel("scripted/rel.json").complete(user("x"))

    assert reply.text == "rel"
    assert reply.cost_usd == pytest.approx(0.00002)


def test_sync_litellm_completion_also_answers_from_the_script(tmp_path: Path) -> None:
    import litellm

    name = scripted_script([{"reply": "sync"}], dir=tmp_path)
    scripted.register_scripted_provider()
    scripted.register_scripted_provider()  # idempotent

    response = litellm.completion(model=name, messages=user("x"), num_retries=0, max_retries=0)

    assert response.choices[0].message.content == "sync"
    assert [p["provider"] for p in litellm.custom_provider_map].count("scripted") == 1


@pytest.mark.anyio
async def test_invalid_script_is_a_clear_bad_request(tmp_path: Path) -> None:
    path = tmp_path / "typo.json"
    path.write_text(json.dumps({"replies": [{"replay": "misspelt"}]}))

    with pytest.raises(ModelError) as caught:
        await LiteLLMModel(f"scripted/{path}").complete(user("x"))

    assert caught.value.kind == "bad_request"
    assert str(path) in str(caught.value) and "replay" in str(caught.value)


@pytest.mark.anyio
async def test_missing_script_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(ModelError) as caught:
        await LiteLLMModel(f"scripted/{tmp_path / 'absent.json'}").complete(user("x"))

    assert caught.value.kind == "not_found"
    assert "absent.json" in str(caught.value)


# --- retries and error mapping -----------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["rate_limit", "timeout", "connection", "server"])
async def test_transient_errors_are_retried_until_success(tmp_path: Path, kind: str, sleeps: list[float]) -> None:
    name = scripted_script([{"error": kind, "times": 2}, {"reply": "recovered"}], dir=tmp_path)
    seen: list[ChatReply] = []
    model = LiteLLMModel(name, max_attempts=3, backoff_s=0.001, on_call=seen.append)

    reply = await model.complete(user("x"))

    assert reply.text == "recovered"
    assert len(sleeps) == 2  # two failed attempts, then the answer
    assert seen == [reply] and model.meter.calls == 1


@pytest.mark.anyio
async def test_transient_error_gives_up_after_max_attempts(tmp_path: Path, sleeps: list[float]) -> None:
    name = scripted_script([{"error": "server", "times": 2}, {"reply": "too late"}], dir=tmp_path)
    model = LiteLLMModel(name, max_attempts=2, backoff_s=0.001)

    with pytest.raises(ModelError) as caught:
        await model.complete(user("x"))

    error = caught.value
    assert (error.kind, error.transient, error.attempts) == ("server", True, 2)
    assert "after 2 attempts" in str(error)
    assert model.meter.calls == 0
    assert (await model.complete(user("x"))).text == "too late"  # exactly two attempts were spent


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["auth", "bad_request", "context_window", "not_found"])
async def test_permanent_errors_are_not_retried(tmp_path: Path, kind: str, sleeps: list[float]) -> None:
    name = scripted_script([{"error": kind}, {"reply": "would have answered a retry"}], dir=tmp_path)
    model = LiteLLMModel(name, max_attempts=3, backoff_s=0.001)

    with pytest.raises(ModelError) as caught:
        await model.complete(user("x"))

    error = caught.value
    assert (error.kind, error.transient, error.attempts) == (kind, False, 1)
    assert sleeps == []
    message = str(error)
    assert message.startswith(f"model {name!r} ") and message.endswith(".") and "\n" not in message


@pytest.mark.anyio
async def test_slow_reply_times_out_on_our_deadline_after_retries(tmp_path: Path, sleeps: list[float]) -> None:
    name = scripted_script([{"reply": "slow", "delay": 30, "times": 2}, {"reply": "fast"}], dir=tmp_path)
    model = LiteLLMModel(name, timeout=120, max_attempts=2, backoff_s=0.001)

    with pytest.raises(ModelError) as caught:
        await model.complete(user("x"), timeout=0.05)

    assert (caught.value.kind, caught.value.transient, caught.value.attempts) == ("timeout", True, 2)
    assert "timed out" in str(caught.value)
    assert (await model.complete(user("x"), timeout=5)).text == "fast"


@pytest.mark.anyio
async def test_retry_after_is_honoured_and_a_usage_window_ends_the_call_saying_when(
    tmp_path: Path, sleeps: list[float]
) -> None:
    name = scripted_script(
        [
            {"error": "rate_limit", "retryAfter": 7},
            {"error": "rate_limit", "retryAfter": 3600},
            {"reply": "ok"},
        ],
        dir=tmp_path,
    )

    with pytest.raises(ModelError) as caught:  # an hour is a usage window: the run waits it out, not the call
        await LiteLLMModel(name, max_attempts=3, backoff_s=0.001).complete(user("x"))

    assert sleeps == [7.0]
    assert (caught.value.kind, caught.value.retry_after_s) == ("rate_limit", 3600.0)


@pytest.mark.anyio
async def test_backoff_grows_exponentially_with_jitter(tmp_path: Path, sleeps: list[float]) -> None:
    name = scripted_script([{"error": "connection", "times": 3}, {"reply": "ok"}], dir=tmp_path)

    await LiteLLMModel(name, max_attempts=4, backoff_s=1.0).complete(user("x"))

    first, second, third = sleeps
    assert 0.5 <= first <= 1.0 and 1.0 <= second <= 2.0 and 2.0 <= third <= 4.0


# --- accounting ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_totals_add_up_and_unknown_cost_makes_the_total_unknown(tmp_path: Path) -> None:
    usage = {"inputTokens": 100, "outputTokens": 10}
    priced = LiteLLMModel(
        scripted_script([{"reply": "a", "usage": usage, "times": None}], pricing=PRICING, dir=tmp_path)
    )
    unpriced = LiteLLMModel(scripted_script([{"reply": "b", "usage": usage, "times": None}], dir=tmp_path))

    for _ in range(3):
        await priced.complete(user("x"))
    await unpriced.complete(user("x"))
    await unpriced.complete(user("x"))

    assert (priced.meter.calls, priced.meter.input_tokens, priced.meter.output_tokens) == (3, 300, 30)
    assert priced.meter.cost_usd == pytest.approx(3 * 0.00012)
    assert (unpriced.meter.calls, unpriced.meter.input_tokens, unpriced.meter.output_tokens) == (2, 200, 20)
    assert unpriced.meter.cost_usd is None


@pytest.mark.anyio
async def test_a_failing_on_call_hook_does_not_lose_the_reply(tmp_path: Path) -> None:
    def broken(reply: ChatReply) -> None:
        raise RuntimeError("log disk full")

    model = LiteLLMModel(scripted_script([{"reply": "kept"}], dir=tmp_path), on_call=broken)

    assert (await model.complete(user("x"))).text == "kept"
    assert model.meter.calls == 1


def test_litellm_model_is_a_chat_model() -> None:
    assert isinstance(LiteLLMModel("scripted/x.json"), ChatModel)


# --- API keys -----------------------------------------------------------------------------


def test_missing_api_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    assert missing_api_key("gpt-4o") == "model 'gpt-4o' needs OPENAI_API_KEY, which is not set."

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert missing_api_key("gpt-4o") is None


def test_known_providers_are_told_as_litellm_tells_them(monkeypatch: pytest.MonkeyPatch) -> None:
    from reflection.keys import _BY_PREFIX, _OPENAI_NAMES

    models = sorted(_OPENAI_NAMES) + [prefix + "some-model" for prefix in _BY_PREFIX]
    for variable in {"OPENAI_API_KEY", *_BY_PREFIX.values()}:
        monkeypatch.delenv(variable, raising=False)
    for model in models:
        told_by_litellm = llm._missing_by_litellm(model)
        assert len(told_by_litellm) == 1, model
        assert missing_api_key(model) == f"model {model!r} needs {told_by_litellm[0]}, which is not set."
    for variable in {"OPENAI_API_KEY", *_BY_PREFIX.values()}:
        monkeypatch.setenv(variable, "")  # set, even empty, is set for litellm
    for model in models:
        assert missing_api_key(model) is None and llm._missing_by_litellm(model) == [], model


def test_local_models_need_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OLLAMA_API_BASE", raising=False)

    assert missing_api_key("scripted/whatever.json") is None
    assert missing_api_key("ollama/llama3") is None
    assert missing_api_key("openai/my-model", api_base="http://localhost:8000/v1") is None


# --- import hygiene (fresh interpreters) --------------------------------------------------

PROBE = """
import json, os, sys
import reflection.llm as llm
after_import = "litellm" in sys.modules
llm.missing_api_key("scripted/x.json")
after_scripted = "litellm" in sys.modules
llm.missing_api_key("gpt-4o")  # a known provider's key: told without litellm
after_known = "litellm" in sys.modules
llm.missing_api_key("some_provider/my-model")  # unknown: not checked, litellm still not imported
after_unknown = "litellm" in sys.modules
llm.price_known("gpt-4o")  # litellm's price map: imports it
print(json.dumps({
    "after_import": after_import,
    "after_scripted": after_scripted,
    "after_known": after_known,
    "after_unknown": after_unknown,
    "after_use": "litellm" in sys.modules,
    "cost_map": os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP"),
    "mode": os.environ.get("LITELLM_MODE"),
    "probe": os.environ.get("GOLDENLOOP_DOTENV_PROBE"),
    "dotenv_switch": os.environ.get("PYTHON_DOTENV_DISABLED"),
}))
"""


def _start_probe(cwd: Path, user_env: dict[str, str]) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LITELLM_", "PYTHON_DOTENV"))}
    env.pop("GOLDENLOOP_DOTENV_PROBE", None)
    env["PYTHONPATH"] = str(REPO_ROOT)
    env.update(user_env)
    return subprocess.Popen(
        [sys.executable, "-c", PROBE], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _probe_result(process: subprocess.Popen[str]) -> dict[str, Any]:
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    result: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    return result


@pytest.mark.slow
def test_litellm_loads_lazily_offline_and_ignores_dotenv(tmp_path: Path) -> None:
    # `python -c` makes python-dotenv look for .env in the current folder.
    (tmp_path / ".env").write_text("GOLDENLOOP_DOTENV_PROBE=leaked\n")
    user_set = {"LITELLM_LOCAL_MODEL_COST_MAP": "true", "LITELLM_MODE": "DEV"}
    # Two fresh interpreters at once: one with our defaults, one where the user chose.
    defaults, chosen = _start_probe(tmp_path, {}), _start_probe(tmp_path, user_set)

    lazy = {"after_import": False, "after_scripted": False, "after_known": False, "after_unknown": False, "after_use": True, "probe": None, "dotenv_switch": None}
    assert _probe_result(defaults) == {**lazy, "cost_map": "True", "mode": "PRODUCTION"}
    assert _probe_result(chosen) == {**lazy, "cost_map": "true", "mode": "DEV"}


def test_a_call_from_a_workers_own_loop_runs_on_the_home_loop_and_is_cancelled_there() -> None:
    """litellm's process-wide state is bound to one event loop: a run whose workers have
    loops of their own makes every call on the home loop; a cancelled caller (the time
    budget, Ctrl-C) cancels the call there too."""
    import asyncio

    import anyio

    from reflection.litellm_setup import litellm_home, on_home_loop

    async def main() -> None:
        home, ran_on, cancelled = asyncio.get_running_loop(), [], anyio.Event()

        async def answer() -> str:
            ran_on.append(asyncio.get_running_loop())
            return "ok"

        async def hang() -> None:
            try:
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                cancelled.set()
                raise

        async def from_own_loop() -> str:
            with anyio.move_on_after(0.2):
                await on_home_loop(hang)
            return await on_home_loop(answer)

        with litellm_home(home):
            assert await anyio.to_thread.run_sync(anyio.run, from_own_loop) == "ok"
            with anyio.fail_after(30):  # a guard against a hang, never a measurement
                await cancelled.wait()
        assert ran_on == [home]
        assert await on_home_loop(answer) == "ok"  # no home named: the caller's own loop

    anyio.run(main)


@pytest.mark.parametrize(("usage", "cached"), [
    ({"prompt_tokens_details": {"cached_tokens": 40}}, 40),  # OpenAI, and OpenAI-compatible servers (llama.cpp's)
    ({"cache_read_input_tokens": 60}, 60),  # Anthropic, as litellm passes it on
    ({}, None),  # a provider that says nothing: priced in full, "not reported"
])
def test_cached_tokens_are_read_as_each_provider_reports_them(usage: dict[str, Any], cached: int | None) -> None:
    litellm = llm.load_warm_litellm()
    assert llm.cached_tokens(litellm.Usage(prompt_tokens=100, completion_tokens=5, total_tokens=105, **usage)) == cached


@pytest.mark.anyio
async def test_a_cached_prompt_is_priced_at_the_cached_rate(tmp_path: Path) -> None:
    pricing = {"inputCostPerToken": 1e-6, "outputCostPerToken": 2e-6, "cachedInputCostPerToken": 1e-7}
    reply_usage = {"inputTokens": 1000, "outputTokens": 100, "cachedTokens": 800}
    name = scripted_script([{"reply": "ok", "usage": reply_usage}], pricing=pricing, dir=tmp_path)

    reply = await LiteLLMModel(name).complete(user("again"))

    assert reply.cached_tokens == 800
    assert reply.cost_usd == pytest.approx(200 * 1e-6 + 800 * 1e-7 + 100 * 2e-6)
