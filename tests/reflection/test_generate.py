"""Reflection generation, prompts and the service, through the scripted model."""

from __future__ import annotations

import json
import random
import re
import string
import threading
import time
from datetime import timedelta

import pytest

from reflection.generate import draft_from_reply, extract_json, generate_reflection
from reflection.llm import LiteLLMModel
from reflection.prompts import format_for_prompt, reflection_messages
from reflection.schema import (
    ITEM_CHARS,
    MAX_ITEMS,
    TEXT_CHARS,
    FailureCategory,
    FailureContext,
    FailureType,
    Reflection,
    utc_now,
)
from reflection.scripted import reset_scripted_state, scripted_script
from reflection.service import ReflectionService
from reflection.store import InMemoryReflectionStore, JsonlReflectionStore

DIGEST = (
    "Command: python -m pytest -q\n"
    "Failing tests (1): tests/test_calc.py::test_add_negative\n"
    "First error: tests/test_calc.py:8: AssertionError: assert 2 == -2\n"
    "Counts: 1 failed, 2 passed"
)


def context(**changes) -> FailureContext:
    body = dict(
        session_id="s1",
        task_id="T-1",
        subtask_id="T-1.1",
        attempt_number=1,
        subtask_title="Fix add",
        failure_type=FailureType.TEST_FAILURE,
        digest=DIGEST,
        error_signature="abc123",
        failing_tests=["tests/test_calc.py::test_add_negative"],
        files_modified=["calc.py"],
        diff="-    return a + b\n+    return abs(a) + abs(b)\n",
    )
    body.update(changes)
    return FailureContext(**body)


@pytest.fixture(autouse=True)
def _fresh():
    reset_scripted_state()


def model_answering(tmp_path, *replies) -> LiteLLMModel:
    name = scripted_script([{"reply": r} for r in replies], dir=tmp_path)
    return LiteLLMModel(name, backoff_s=0.001, max_attempts=1)


GOOD = {
    "category": "edge_case",
    "analysis": "add() took absolute values, so add(-1, -1) returned 2.",
    "suggestion": "Return a + b unchanged.",
    "actionItems": ["Remove abs() in calc.py"],
    "confidence": 0.8,
}


@pytest.mark.anyio
async def test_a_good_reply_becomes_an_llm_reflection_with_usage(tmp_path):
    model = model_answering(tmp_path, "Sure!\n```json\n" + json.dumps(GOOD) + "\n```\nHope it helps.")

    r = await generate_reflection(context(), model, timeout_s=10)

    assert r.source == "llm" and r.category is FailureCategory.EDGE_CASE
    assert r.analysis == GOOD["analysis"] and r.action_items == GOOD["actionItems"]
    assert r.task_id == "T-1" and r.error_signature == "abc123" and r.files_modified == ["calc.py"]
    assert r.usage is not None and r.usage.input_tokens and r.usage.cost_usd is None
    assert r.model and r.model.startswith("scripted/")


@pytest.mark.anyio
async def test_a_slow_first_import_of_litellm_is_not_counted_in_the_reflection_timeout(tmp_path, monkeypatch):
    # On a loaded machine `import litellm` takes 3 to 25 s, and the process's first model
    # call pays it: here 2 s, against a reflection timeout of 1 s.
    import reflection.litellm_setup as setup
    import reflection.llm as llm
    import reflection.scripted as scripted

    litellm, lock, imported = setup.load_litellm(), threading.Lock(), []

    def slow_import():
        with lock:
            if not imported:
                time.sleep(2.0)
                imported.append(True)
        return litellm

    for module in (setup, llm, scripted):
        monkeypatch.setattr(module, "load_litellm", slow_import)
    # The model itself answers well within the timeout.
    name = scripted_script([{"reply": json.dumps(GOOD), "delay": 0.2}], dir=tmp_path)
    model = LiteLLMModel(name, backoff_s=0.001, max_attempts=1)

    r = await generate_reflection(context(), model, timeout_s=1.0)

    assert imported == [True]
    assert r.source == "llm" and r.analysis == GOOD["analysis"]
    assert r.usage is not None and r.usage.input_tokens


MALFORMED = {
    "empty": "",
    "prose only": "The test failed because add is wrong. Try again.",
    "truncated json": '{"category": "edge_case", "analysis": "add took abs',
    "wrong types": json.dumps({"category": 7, "analysis": ["a"], "suggestion": None}),
    "one megabyte": "x" * 1_000_000 + "{" * 1000,
    "json array": json.dumps([GOOD]),
}


@pytest.mark.anyio
@pytest.mark.parametrize("kind", MALFORMED)
async def test_malformed_replies_fall_back_to_a_valid_heuristic_reflection(tmp_path, kind):
    model = model_answering(tmp_path, MALFORMED[kind])

    r = await generate_reflection(context(), model, timeout_s=10)

    assert r.source == "heuristic"
    Reflection.from_json_line(r.to_json_line())  # a valid record
    assert "test_add_negative" in r.analysis + r.suggestion + " ".join(r.action_items)
    assert r.usage is not None and r.usage.input_tokens  # the wasted call is still counted


@pytest.mark.anyio
async def test_a_reflection_that_repeats_an_earlier_one_is_replaced_by_the_heuristic(tmp_path):
    model = model_answering(tmp_path, json.dumps(GOOD), json.dumps(GOOD))
    first = await generate_reflection(context(), model)
    # The same words again (case and spacing aside) after the next attempt failed the same way.
    second = await generate_reflection(context(attempt_number=2, previous_signature="abc123"), model,
                                       previous=[first])
    assert first.source == "llm"
    assert second.source == "heuristic" and second.analysis != first.analysis
    assert second.usage is not None and second.usage.input_tokens  # the call still counts


@pytest.mark.anyio
async def test_a_model_error_or_timeout_falls_back(tmp_path):
    name = scripted_script([{"error": "auth"}, {"reply": json.dumps(GOOD), "delay": 5}], dir=tmp_path)
    model = LiteLLMModel(name, backoff_s=0.001, max_attempts=1)

    first = await generate_reflection(context(), model, timeout_s=5)
    second = await generate_reflection(context(), model, timeout_s=0.3)

    assert first.source == second.source == "heuristic"


def test_replies_are_clamped_and_categories_mapped():
    long = "word " * 400
    draft = draft_from_reply(
        {
            "category": "Logic Error",
            "analysis": long,
            "suggestion": long,
            "actionItems": ["x" * 500] * 9,
            "confidence": 85,
        }
    )
    assert draft.category is FailureCategory.ROOT_CAUSE
    assert len(draft.analysis) <= 500 and len(draft.suggestion) <= 500
    assert len(draft.action_items) == 5 and all(len(i) <= 200 for i in draft.action_items)
    assert draft.confidence == 0.85
    assert draft_from_reply({**GOOD, "confidence": -3}).confidence == 0.0
    assert draft_from_reply({**GOOD, "category": "something new"}).category is FailureCategory.ROOT_CAUSE
    with pytest.raises(ValueError):
        draft_from_reply({"category": "edge_case"})


def test_extract_json_finds_the_object_inside_prose_and_fences():
    assert extract_json('Here: {"a": {"b": "}"}} and more') == {"a": {"b": "}"}}
    assert extract_json("no json here") is None
    assert extract_json("[1, 2]") is None


def test_the_reflection_prompt_names_the_failure_and_warns_on_a_repeat():
    previous = [_reflection(1, "first idea")]
    messages = reflection_messages(context(previous_signature="abc123"), previous)
    text = messages[-1]["content"]
    assert "test_add_negative" in text and "Attempt: 1" in text and "calc.py" in text
    assert "failed exactly like the one before" in text
    assert "first idea" in text


def _reflection(attempt: int, analysis: str, subtask: str = "T-1.1", **extra) -> Reflection:
    return Reflection(
        session_id="s1",
        task_id="T-1",
        subtask_id=subtask,
        attempt_number=attempt,
        category=FailureCategory.ROOT_CAUSE,
        analysis=analysis,
        suggestion=f"suggestion {attempt}",
        action_items=[f"item {attempt}"],
        confidence=0.5,
        **extra,
    )


def test_format_for_prompt_lists_newest_first_and_ends_with_the_instruction():
    block = format_for_prompt([_reflection(1, "one"), _reflection(3, "three"), _reflection(2, "two")])
    assert block.index("three") < block.index("two") < block.index("one")
    assert "- **What to do differently**: suggestion 3" in block and "  - item 2" in block
    assert block.rstrip().endswith("You MUST address these issues. Do NOT repeat the same mistakes.")
    assert format_for_prompt([]) == ""


def test_the_injected_block_is_the_seed_format_heading_lead_then_a_section_per_attempt():
    block = format_for_prompt([_reflection(1, "stale fixture"), _reflection(2, "wrong sign")])
    assert block.splitlines() == [
        "## Reflections from Previous Attempts",
        "",
        "Learn from these insights before proceeding:",
        "",
        "### Attempt 2",
        "- **What went wrong**: wrong sign",
        "- **What to do differently**: suggestion 2",
        "- **Action items**:",
        "  - item 2",
        "",
        "### Attempt 1",
        "- **What went wrong**: stale fixture",
        "- **What to do differently**: suggestion 1",
        "- **Action items**:",
        "  - item 1",
        "",
        "You MUST address these issues. Do NOT repeat the same mistakes.",
    ]


@pytest.mark.anyio
async def test_the_service_saves_redacted_recalls_three_and_prunes(tmp_path):
    store = JsonlReflectionStore.for_project(tmp_path)
    service = ReflectionService(store, None)  # heuristic only: no tokens
    secret = "sk-" + "A1b2C3d4" * 6
    for attempt in range(1, 6):
        await service.reflect(context(attempt_number=attempt, digest=DIGEST + f"\nOPENAI_API_KEY={secret}"))
    service.save(_reflection(9, f"leaked {secret}", subtask="T-2.1"))

    text = (tmp_path / ".openagents" / "memory" / "reflections.jsonl").read_text()
    assert secret not in text
    recent = service.recent("T-1.1")
    assert [r.attempt_number for r in recent] == [5, 4, 3]
    old = _reflection(1, "ancient", created_at=utc_now() - timedelta(days=400))
    service.save(old)
    assert service.prune(retention_days=90) == 1
    assert store.count() == 6


@pytest.mark.anyio
async def test_the_service_works_on_the_in_memory_store_and_never_raises(tmp_path):
    name = scripted_script([{"error": "server", "times": None}], dir=tmp_path)
    service = ReflectionService(InMemoryReflectionStore(), LiteLLMModel(name, backoff_s=0.001, max_attempts=2))

    r = await service.reflect(context())

    assert r.source == "heuristic" and service.recent("T-1.1") == [r]


# --- redact first, then clip ----------------------------------------------------------------


def _github_token(seed: int) -> str:
    rng = random.Random(seed)
    return "gh" + "p_" + "".join(rng.choices(string.ascii_letters + string.digits, k=36))


def _with_token_at(token: str, start: int, length: int) -> str:
    """Words, then `token` starting at index `start` (a multiple of 5), then more words."""
    text = ("word " * 400)[:start] + token + " " + "word " * 400
    assert text.index(token) == start
    return text[:length]


def _leaked(token: str, stored: str) -> list[str]:
    """The eight-character pieces of `token` that made it into `stored`."""
    return [token[i : i + 8] for i in range(len(token) - 7) if token[i : i + 8] in stored]


def _stored(tmp_path) -> list[dict]:
    lines = (tmp_path / ".openagents" / "memory" / "reflections.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _within_limits(record: dict) -> bool:
    items = record["actionItems"]
    return (
        len(record["analysis"]) <= TEXT_CHARS
        and len(record["suggestion"]) <= TEXT_CHARS
        and len(items) <= MAX_ITEMS
        and all(len(item) <= ITEM_CHARS for item in items)
    )


@pytest.mark.anyio
async def test_a_token_cut_by_the_length_limit_is_not_stored_even_in_part(tmp_path):
    # Each field's token starts 14 characters before its limit, so a cut made first
    # would keep "ghp_" and ten more characters: too short to be recognised afterwards.
    analysis, suggestion, item = _github_token(1), _github_token(2), _github_token(3)
    reply = {
        "category": "environment",
        "analysis": _with_token_at(analysis, TEXT_CHARS - 15, 900),
        "suggestion": _with_token_at(suggestion, TEXT_CHARS - 15, 900),
        "actionItems": [_with_token_at(item, ITEM_CHARS - 15, 400)],
        "confidence": 0.7,
    }
    model = model_answering(tmp_path, json.dumps(reply))
    service = ReflectionService(JsonlReflectionStore.for_project(tmp_path), model)

    saved = await service.reflect(context())

    text = (tmp_path / ".openagents" / "memory" / "reflections.jsonl").read_text()
    assert saved.source == "llm"
    assert _leaked(analysis, text) == _leaked(suggestion, text) == _leaked(item, text) == []
    # The cut fell inside each placeholder: it went whole, no "[REDACTED:git…" is left.
    assert text.count("[REDACTED:") == len(re.findall(r"\[REDACTED:[a-z_]+\]", text))
    assert saved.analysis.endswith("word…") and _within_limits(_stored(tmp_path)[0])


@pytest.mark.anyio
async def test_a_token_cut_by_the_heuristics_quote_of_the_error_is_not_stored(tmp_path):
    # The heuristic quotes "Kind: message" up to 160 characters; the token straddles that.
    token = _github_token(4)
    message = "push to origin failed: " + "remote: permission denied for this credential " * 3
    message = message[: 160 - len("PermissionError: ") - 9] + " " + token + " (HTTP 403)"
    digest = DIGEST.replace("AssertionError: assert 2 == -2", f"PermissionError: {message}")
    service = ReflectionService(JsonlReflectionStore.for_project(tmp_path), None)

    saved = await service.reflect(context(digest=digest))

    text = (tmp_path / ".openagents" / "memory" / "reflections.jsonl").read_text()
    assert "push to origin failed" in saved.analysis  # the error is quoted...
    assert _leaked(token, text) == []  # ...without any part of the token


@pytest.mark.anyio
async def test_placeholders_longer_than_their_secrets_do_not_push_a_field_past_its_limit(tmp_path):
    # "10.0.0.1" (8 characters) becomes "[REDACTED:private_ip]" (21): a field that fits
    # before redaction no longer fits after it.
    hosts = " ".join(f"10.0.{i}.{i}" for i in range(60))
    reply = {
        "category": "environment",
        "analysis": ("Connection refused by " + hosts)[: TEXT_CHARS - 1],
        "suggestion": ("Allow the runner to reach " + hosts)[: TEXT_CHARS],
        "actionItems": [("Open the firewall for " + hosts)[:ITEM_CHARS]] * 3,
        "confidence": 0.6,
    }
    model = model_answering(tmp_path, json.dumps(reply))
    service = ReflectionService(JsonlReflectionStore.for_project(tmp_path), model)

    saved = await service.reflect(context())

    record = _stored(tmp_path)[0]
    assert _within_limits(record) and record["analysis"] == saved.analysis
    assert "10.0.0.0" not in json.dumps(record) and "[REDACTED:private_ip]" in record["analysis"]


def test_a_record_built_by_a_caller_is_redacted_then_fitted_when_saved(tmp_path):
    service = ReflectionService(JsonlReflectionStore.for_project(tmp_path), None)
    token = _github_token(5)
    hosts = " ".join(f"192.168.1.{i}" for i in range(1, 80))
    record = _reflection(1, _with_token_at(token, TEXT_CHARS - 15, 2000))
    record.action_items = [f"Allow {hosts}"] * 8

    saved = service.save(record)

    stored = _stored(tmp_path)[0]
    assert _within_limits(stored) and stored["analysis"] == saved.analysis
    assert _leaked(token, json.dumps(stored)) == [] and "192.168.1.1" not in json.dumps(stored)
    assert stored["actionItems"][0].startswith("Allow [REDACTED:private_ip] [REDACTED:private_ip]")
