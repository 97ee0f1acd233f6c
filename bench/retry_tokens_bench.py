"""What a retry costs in tokens, and how much of it a prompt cache could serve.

One realistic task (a small inventory module of about 90 lines with a bug its tests show)
is run through `do-one-task` with the scripted model: the first two replies are wrong in
different ways, the third is right, as a small model's retries tend to go. Every model
call goldenloop makes is captured at litellm's door (its messages and the usage the
scripted model reports: a token per 4 characters), so the same capture works for any
version of goldenloop: `--before DIR` runs a copy of an older version (a `git archive`)
beside this checkout's.

Per call it prints the input tokens, the part of them an earlier prompt of the task began
with (what a provider's prompt cache serves), and the output tokens; per form, the calls,
the totals, and the tokens at cache prices (cached input at a tenth).

    .venv/bin/python bench/retry_tokens_bench.py
    git archive 4c7843d | tar -x -C /tmp/before && .venv/bin/python bench/retry_tokens_bench.py --before /tmp/before
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchkit import git, init_repo

CHECKOUT = Path(__file__).resolve().parents[1]
CACHED_PRICE = 0.1  # a cached input token against a fresh one (Anthropic's reads, OpenAI's newer models)
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"

STOCK = '''"""Stock levels of the shop's warehouse."""

from dataclasses import dataclass, field


class StockError(ValueError):
    """An operation the stock cannot do."""


@dataclass
class Item:
    sku: str
    name: str
    on_hand: int = 0
    reserved: int = 0

    @property
    def available(self) -> int:
        return self.on_hand - self.reserved


@dataclass
class Stock:
    items: dict[str, Item] = field(default_factory=dict)

    def add(self, sku: str, name: str, quantity: int = 0) -> Item:
        if quantity < 0:
            raise StockError(f"cannot add {quantity} of {sku}")
        item = self.items.setdefault(sku, Item(sku, name))
        item.on_hand += quantity
        return item

    def reserve(self, sku: str, quantity: int) -> None:
        item = self._item(sku)
        if quantity <= 0:
            raise StockError(f"cannot reserve {quantity} of {sku}")
        if quantity > item.on_hand:
            raise StockError(f"only {item.available} of {sku} available")
        item.reserved += quantity

    def release(self, sku: str, quantity: int) -> None:
        item = self._item(sku)
        item.reserved = max(item.reserved - quantity, 0)

    def ship(self, sku: str, quantity: int) -> None:
        item = self._item(sku)
        if quantity > item.reserved:
            raise StockError(f"only {item.reserved} of {sku} reserved")
        item.reserved -= quantity
        item.on_hand -= quantity

    def low(self, threshold: int) -> list[str]:
        return sorted(sku for sku, item in self.items.items() if item.available < threshold)

    def _item(self, sku: str) -> Item:
        try:
            return self.items[sku]
        except KeyError:
            raise StockError(f"unknown item {sku}") from None
'''
TESTS = '''import pytest

from stock import Stock, StockError


def shop():
    stock = Stock()
    stock.add("B-1", "Dune", 5)
    return stock


def test_reserve_within_stock():
    stock = shop()
    stock.reserve("B-1", 3)
    assert stock.items["B-1"].available == 2


def test_a_second_reservation_cannot_take_what_the_first_holds():
    stock = shop()
    stock.reserve("B-1", 3)
    with pytest.raises(StockError, match="only 2 of B-1 available"):
        stock.reserve("B-1", 3)


def test_ship_what_was_reserved():
    stock = shop()
    stock.reserve("B-1", 2)
    stock.ship("B-1", 2)
    assert stock.items["B-1"].on_hand == 3


def test_low_stock():
    stock = shop()
    stock.reserve("B-1", 4)
    assert stock.low(2) == ["B-1"]
'''
BUG = "        if quantity > item.on_hand:\n"
WRONG_1 = "        if quantity >= item.on_hand:\n"  # still lets a second reservation through
WRONG_2 = "        if quantity > item.on_hand - 1:\n"
RIGHT = "        if quantity > item.available:\n"
WENT_WRONG = ("What went wrong: reserve() compares with on_hand, which ignores what is already reserved, so "
              "test_a_second_reservation_cannot_take_what_the_first_holds reserved 6 of 5.\n"
              "What to do differently: compare the quantity with item.available.\n\n")
REFLECTION = json.dumps({
    "category": "root_cause", "confidence": 0.8, "actionItems": ["compare with item.available in reserve()"],
    "analysis": "reserve() compares with on_hand, which ignores what is already reserved.",
    "suggestion": "Compare the quantity with item.available.",
})
TASK = {"id": "T-1", "title": "A second reservation can take books the first one holds",
        "description": "Support saw two carts both holding the last copies of a book. reserve() must refuse "
                       "more than what is still available.", "type": "bug", "priority": 1, "status": "open"}


def edit(old: str, new: str) -> str:
    return f"stock.py\n<<<<<<< SEARCH\n{old}=======\n{new}>>>>>>> REPLACE\n"


def script(one_call: bool) -> list[dict[str, Any]]:
    """Three replies in order; each retry edits the tree the one before it left."""
    said = WENT_WRONG if one_call else ""
    second, third = edit(WRONG_1, WRONG_2), edit(WRONG_2, RIGHT)
    return [
        {"match": "Failure digest", "reply": REFLECTION, "times": None},
        {"match": "Task T-1", "reply": edit(BUG, WRONG_1)},
        {"match": "Task T-1", "reply": said + second},
        {"match": "Task T-1", "reply": said + third},
        {"match": "How the task ended", "reply": "{}", "times": None},
    ]


def make_repo(root: Path, one_call: bool) -> Path:
    repo = init_repo(root / "repo")
    (repo / "stock.py").write_text(STOCK)
    (repo / "test_stock.py").write_text(TESTS)
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    meta = repo / ".openagents"
    (meta / "tasks.jsonl").write_text(json.dumps(TASK) + "\n")
    (meta / "script.json").write_text(json.dumps({"replies": script(one_call)}))
    config: dict[str, Any] = {"testCommands": [f"{PYTEST} test_stock.py"], "decomposeMinChars": 0,
                              "defaultModel": "scripted/.openagents/script.json",
                              "reflexion": {"maxRetries": 3}, "memory": {"taskReflection": False}}
    if one_call:
        config["reflexion"]["oneCall"] = True
    (meta / "project.json").write_text(json.dumps(config))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the shop's stock")
    return repo


def captured_calls(repo: Path) -> list[dict[str, Any]]:
    """Run the task with litellm's completion wrapped: each call's messages and usage."""
    from orchestrator.cli import do_one_task_main
    from reflection.llm import load_warm_litellm

    litellm = load_warm_litellm()
    inner, calls = litellm.acompletion, []

    async def recording(*args: Any, **kwargs: Any) -> Any:
        response = await inner(*args, **kwargs)
        usage = response.usage
        calls.append({"messages": kwargs.get("messages") or [], "input": usage.prompt_tokens,
                      "output": usage.completion_tokens})
        return response

    litellm.acompletion = recording
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = do_one_task_main(["--dir", str(repo)])
    finally:
        litellm.acompletion = inner
    if code != 0:
        raise SystemExit(f"the task did not pass (exit {code}): the scripted replies no longer fit the prompts")
    return calls


def text_of(messages: list[dict[str, Any]]) -> str:
    return "".join(f"\x00{m.get('role')}\x01{m.get('content') or ''}" for m in messages)


def figures(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per call: its kind, tokens in, the tokens an earlier prompt began with, tokens out."""
    rows, sent = [], []
    for call in calls:
        text = text_of(call["messages"])
        shared = max((len(os.path.commonprefix([text, earlier])) for earlier in sent), default=0)
        sent.append(text)
        system = next((m.get("content") or "" for m in call["messages"] if m.get("role") == "system"), "")
        kind = ("reflect" if "self-reflection" in system else "task outcome" if "How the task ended" in text
                else "attempt" if "Task T-1" in text else "other")
        cached = round(call["input"] * shared / len(text)) if text else 0
        rows.append({"kind": kind, "input": call["input"], "cached": cached, "output": call["output"]})
    return rows


def worker(one_call: bool) -> None:
    """Run in a subprocess whose PYTHONPATH is the version under test; print its figures."""
    with tempfile.TemporaryDirectory(prefix="retry-tokens-") as tmp:
        rows = figures(captured_calls(make_repo(Path(tmp), one_call)))
    print(json.dumps([r for r in rows if r["kind"] != "other"]))


def run(code: Path, one_call: bool) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": f"{code}{os.pathsep}{CHECKOUT / 'bench'}"}
    argv = [sys.executable, str(Path(__file__).resolve()), "--worker", "one" if one_call else "two"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"{code}: {(done.stderr or done.stdout).strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def show(label: str, rows: list[dict[str, Any]]) -> None:
    fresh = sum(r["input"] - r["cached"] for r in rows)
    cached, out = sum(r["cached"] for r in rows), sum(r["output"] for r in rows)
    print(f"\n{label}: {len(rows)} calls, {fresh + cached} tokens in ({cached} a cache serves), {out} out; "
          f"at cache prices {fresh + CACHED_PRICE * cached + out:,.0f}")
    print("| call | kind | tokens in | a cache serves | tokens out |\n| --- | --- | --- | --- | --- |")
    for n, r in enumerate(rows, start=1):
        print(f"| {n} | {r['kind']} | {r['input']} | {r['cached']} | {r['output']} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="a copy of an older goldenloop (git archive) to run beside")
    parser.add_argument("--worker", choices=["one", "two"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker == "one")
        return 0
    if args.before is not None:
        show(f"before ({args.before}): a reflection call, then the retry", run(args.before.resolve(), False))
    show("now: a reflection call, then the retry in the same chat", run(CHECKOUT, False))
    show("now, reflexion.oneCall: the retry's reply reflects first", run(CHECKOUT, True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
