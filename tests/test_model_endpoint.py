"""Any model endpoint, no ceremony: model.apiBase / --api-base, model.apiKeyEnv, and the
API key decided from the environment alone, only when a model call can happen."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from projects import FIX_ADD, do_one_task, make_project, tasks_on_disk

from orchestrator.session import Overrides, ProjectSession
from reflection.keys import LOCAL_PLACEHOLDER_KEY
from reflection.llm import LiteLLMModel, missing_api_key

KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "GROQ_API_KEY",
                 "MISTRAL_API_KEY", "DEEPSEEK_API_KEY", "OPENROUTER_API_KEY", "TOGETHERAI_API_KEY", "AZURE_API_KEY",
                 "AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "MY_GATEWAY_KEY")


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for variable in KEY_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.aws/credentials
    return monkeypatch


@pytest.fixture
def without_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    """`import litellm` fails from here on: code that needs it cannot pass unnoticed,
    whether or not an earlier test of this process imported it."""
    monkeypatch.setitem(sys.modules, "litellm", None)


# --- the key decision table -------------------------------------------------------------

NEEDS = {
    "openai/my-model": "OPENAI_API_KEY",
    "anthropic/claude-sonnet-4-5": "ANTHROPIC_API_KEY",
    "gemini/gemini-2.5-pro": "GEMINI_API_KEY",
    "groq/llama-3.3-70b": "GROQ_API_KEY",
    "mistral/codestral-latest": "MISTRAL_API_KEY",
    "deepseek/deepseek-coder": "DEEPSEEK_API_KEY",
    "openrouter/qwen/qwen3-coder": "OPENROUTER_API_KEY",
    "together_ai/Qwen/Qwen2.5-Coder-32B": "TOGETHERAI_API_KEY",
    "azure/my-deployment": "AZURE_API_KEY",
    "bedrock/anthropic.claude-3-5-sonnet": "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
    "gpt-4o-mini": "OPENAI_API_KEY",
    "gpt-4o-2024-08-06": "OPENAI_API_KEY",  # a dated variant: the family decides
    "o3": "OPENAI_API_KEY",
    "claude-sonnet-4-5": "ANTHROPIC_API_KEY",
}
NEEDS_NONE = ("ollama/qwen2.5-coder", "ollama_chat/llama3", "scripted/script.json", "hosted_vllm/qwen",
              "some_provider/unknown-model", "my-local-model")


def test_the_key_table_decides_without_litellm(no_keys: pytest.MonkeyPatch, without_litellm: None) -> None:
    for model, variable in NEEDS.items():
        verb = "are" if " and " in variable else "is"
        assert missing_api_key(model) == f"model {model!r} needs {variable}, which {verb} not set.", model
    for model in NEEDS_NONE:  # local, offline, or a provider the table does not know: no check
        assert missing_api_key(model) is None, model
    no_keys.setenv("GOOGLE_API_KEY", "k")  # gemini takes either name
    no_keys.setenv("AWS_PROFILE", "dev")
    no_keys.setenv("OPENAI_API_KEY", "")  # set, even empty, is set (as for litellm)
    for model in ("gemini/gemini-2.5-pro", "bedrock/anthropic.claude-3-5-sonnet", "gpt-4o"):
        assert missing_api_key(model) is None, model


def test_a_local_endpoint_needs_no_key_but_a_named_variable_must_be_set(
    no_keys: pytest.MonkeyPatch, without_litellm: None
) -> None:
    for base in ("http://localhost:8000/v1", "http://127.0.0.1:8080/v1", "http://[::1]:1234/v1"):
        assert missing_api_key("openai/qwen", api_base=base) is None, base
    remote = "https://gateway.example.com/v1"
    told = missing_api_key("openai/qwen", api_base=remote)  # a remote server: the provider's key
    assert told == "model 'openai/qwen' needs OPENAI_API_KEY, which is not set."
    named = "model 'openai/qwen' needs MY_GATEWAY_KEY, which is not set."
    assert missing_api_key("openai/qwen", api_base=remote, api_key_env="MY_GATEWAY_KEY") == named
    assert missing_api_key("ollama/qwen", api_key_env="MY_GATEWAY_KEY") == named.replace("openai", "ollama")
    no_keys.setenv("MY_GATEWAY_KEY", "secret")
    assert missing_api_key("openai/qwen", api_base=remote, api_key_env="MY_GATEWAY_KEY") is None


# --- a real litellm call to an OpenAI-compatible server on a loopback port -----------------


class _FakeOpenAI(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "model": body.get("model")})
        reply = json.dumps({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body.get("model"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "hello from the fake server"}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def fake_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    _FakeOpenAI.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_litellm_calls_the_api_base_with_a_placeholder_or_the_named_key(
    fake_server: str, no_keys: pytest.MonkeyPatch
) -> None:
    ask = [{"role": "user", "content": "hi"}]
    local = LiteLLMModel("openai/test-model", api_base=fake_server, timeout=20, max_attempts=1)
    reply = anyio.run(lambda: local.complete(ask))
    assert (reply.text, reply.input_tokens, reply.output_tokens) == ("hello from the fake server", 3, 5)

    no_keys.setenv("MY_GATEWAY_KEY", "secret-123")
    keyed = LiteLLMModel("openai/test-model", api_base=fake_server, api_key_env="MY_GATEWAY_KEY", timeout=20,
                         max_attempts=1)
    anyio.run(lambda: keyed.complete(ask))

    seen = _FakeOpenAI.seen
    assert [s["path"] for s in seen] == ["/v1/chat/completions"] * 2
    assert [s["auth"] for s in seen] == [f"Bearer {LOCAL_PLACEHOLDER_KEY}", "Bearer secret-123"]
    assert seen[0]["model"] == "test-model"
    assert "secret" not in repr(keyed) and "secret" not in repr(vars(keyed))  # read at call time, never kept


# --- the session ------------------------------------------------------------------------


def test_api_base_from_the_command_line_reaches_every_model(git_repo: Path, no_keys: pytest.MonkeyPatch) -> None:
    repo = make_project(git_repo, [], config={"model": {"name": "openai/qwen", "apiBase": "https://far.example.com/v1"},
                                              "memory": {"embeddingModel": "openai/embed"}})
    url = "http://localhost:8000/v1"
    with ProjectSession(repo, Overrides(api_base=url)) as session:  # local: no key asked for
        c = session.config
        models = [session.base_model(name) for name in (c.default_model, c.reflection_model, c.review_model)]
        assert [(m.name, m.api_base) for m in models] == [("openai/qwen", url)] * 3


def test_a_bad_api_base_on_the_command_line_exits_2(git_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_project(git_repo, [{"reply": FIX_ADD}])

    assert do_one_task(repo, "--api-base", "localhost:8000/v1") == 2

    assert "--api-base must be an http:// or https:// URL" in capsys.readouterr().err


def test_a_missing_named_key_says_which_variable_and_exits_2(
    git_repo: Path, capsys: pytest.CaptureFixture[str], no_keys: pytest.MonkeyPatch, without_litellm: None
) -> None:
    repo = make_project(git_repo, [], config={
        "model": {"name": "openai/qwen", "apiBase": "https://gateway.example.com/v1", "apiKeyEnv": "MY_GATEWAY_KEY"}})

    assert do_one_task(repo) == 2

    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["do-one-task: model 'openai/qwen' needs MY_GATEWAY_KEY, which is not set: "
                   "export it (model.apiKeyEnv names it)."]
    assert tasks_on_disk(repo)["T-1"]["status"] == "open"


def test_a_scripted_model_named_in_model_runs_and_ignores_the_api_base(
    git_repo: Path, no_keys: pytest.MonkeyPatch
) -> None:
    repo = make_project(git_repo, [{"match": "Task T-1", "reply": FIX_ADD}], config={
        "defaultModel": "gpt-4o",
        "model": {"name": "scripted/.openagents/script.json", "apiBase": "http://localhost:9/v1"}})

    assert do_one_task(repo) == 0

    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"


FIXED_CALC = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"


def test_a_command_executor_project_with_no_key_runs_without_litellm(
    git_repo: Path, no_keys: pytest.MonkeyPatch, without_litellm: None
) -> None:
    # Heuristic reflections, decomposition on but the task too short, no review: no model call.
    repo = make_project(git_repo, [], files={"fixed_calc.txt": FIXED_CALC}, config={
        "defaultModel": "claude-sonnet-4-5", "decomposeMinChars": 400, "reflexion": {"useLLM": False},
        "executor": {"kind": "command", "command": "test -s {prompt_file} && cp fixed_calc.txt calc.py"}})

    assert do_one_task(repo) == 0

    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert sys.modules["litellm"] is None  # never imported: it would have failed
