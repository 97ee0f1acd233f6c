"""The task reflection SPI on its own: stores, identity, the model's strategy, the notes block."""

from __future__ import annotations

import hashlib
import json
import threading

import anyio
import pytest

from reflection.llm import ChatReply
from reflection.task_prompts import task_notes_block
from reflection.task_reflection import TaskReflection, TaskReflectionInput, task_identity
from reflection.task_reflector import TaskReflector
from reflection.task_store import InMemoryTaskReflectionStore, JsonTaskReflectionStore, TaskReflectionStore
from reflection.task_strategy import LlmReflectionStrategy


def notes(text: str, runs: int = 1) -> TaskReflection:
    return TaskReflection(refined_description=text, observations=["seen"], run_count=runs)


@pytest.fixture(params=["memory", "file"])
def store(request, tmp_path) -> TaskReflectionStore:
    if request.param == "memory":
        return InMemoryTaskReflectionStore()
    return JsonTaskReflectionStore(tmp_path / "memory" / "task-reflections.json")


def test_identity_is_the_hex_sha256_of_the_description():
    assert task_identity("fix add") == hashlib.sha256(b"fix add").hexdigest()


def test_stores_round_trip_and_the_last_write_wins(store):
    assert store.retrieve("k") is None
    store.store("k", notes("first"))
    store.store("other", notes("other"))
    last = notes("second", runs=2)
    store.store("k", last)
    assert store.retrieve("k") == last
    assert store.retrieve("other").refined_description == "other"
    assert isinstance(store, TaskReflectionStore)


def test_the_file_store_is_read_by_a_new_store_and_survives_damage(tmp_path):
    path = tmp_path / "task-reflections.json"
    kept = notes("kept")
    JsonTaskReflectionStore(path).store("k", kept)
    assert JsonTaskReflectionStore(path).retrieve("k") == kept
    assert list(json.loads(path.read_text())) == ["k"]
    path.write_text("{torn")
    assert JsonTaskReflectionStore(path).retrieve("k") is None  # a damaged cache costs the notes only


def test_concurrent_writers_keep_every_identity(tmp_path):
    path = tmp_path / "task-reflections.json"
    writers = [threading.Thread(target=lambda i=i: JsonTaskReflectionStore(path).store(f"k{i}", notes(str(i))))
               for i in range(8)]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    assert sorted(json.loads(path.read_text())) == sorted(f"k{i}" for i in range(8))


class Model:
    """A ChatModel that answers one text (or raises), and remembers what it was asked."""

    name = "fake"

    def __init__(self, answer: str | Exception) -> None:
        self.answer, self.asked = answer, []

    async def complete(self, messages, *, timeout=None, max_tokens=None, temperature=None) -> ChatReply:
        self.asked.append(messages)
        if isinstance(self.answer, Exception):
            raise self.answer
        return ChatReply(text=self.answer, model=self.name, input_tokens=None, output_tokens=None,
                         cost_usd=None, latency_s=0.0)


GIVEN = TaskReflectionInput("fix add", "- add(2, 3) == 5", "diff --git a/calc.py")


def test_the_strategy_clamps_and_redacts_the_reply():
    secret = "sk-" + "a1B2" * 12
    reply = json.dumps({"refinedDescription": f"use {secret} " + "x" * 5000,
                        "observations": ["one", "", 7, *[f"n{i}" for i in range(9)]]})
    made = anyio.run(LlmReflectionStrategy(Model(reply)).reflect, GIVEN)
    assert secret not in made.refined_description and len(made.refined_description) <= 2000
    assert made.observations == ["one", "n0", "n1", "n2", "n3"]


@pytest.mark.parametrize("answer", ["no json here", '{"observations": ["x"]}', RuntimeError("down")])
def test_any_model_trouble_makes_no_reflection(answer):
    assert anyio.run(LlmReflectionStrategy(Model(answer)).reflect, GIVEN) is None


def test_the_reflector_counts_runs_and_shows_the_notes_block():
    model = Model(json.dumps({"refinedDescription": "better", "refinedExpectedOutput": "exact",
                              "observations": ["o1"]}))
    reflector = TaskReflector(InMemoryTaskReflectionStore(), LlmReflectionStrategy(model))
    first = anyio.run(reflector.reflect, "fix add", "", "diff")
    second = anyio.run(reflector.reflect, "fix add", "", "diff")
    assert (first.is_first, second.is_first, second.reflection.run_count) == (True, False, 2)
    assert "better" in model.asked[1][1]["content"]  # the prior notes go into the next question
    block = reflector.notes_for("fix add")
    headings = ["## Task Improvement Notes (from prior executions)", "### Refined description (quoted)",
                "### Output guidance (quoted)", "### Observations (quoted)", "---"]
    assert [block.index(h) for h in headings] == sorted(block.index(h) for h in headings)
    assert reflector.notes_for("another task") == "" == task_notes_block(None)
