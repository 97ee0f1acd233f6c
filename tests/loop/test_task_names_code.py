"""A task that names code, not files: the model is told which file, and retries stay on it.

Seen with Qwen2.5-Coder-1.5B on the bookshop backlog (bench/backlog/): "format_price(123456)
shows ..." named no file, so the prompt ended with a generic "reply with each file you
change", and the model copied the repository listing back until its output limit. The
retry's repair hint lists every file of the repository; read as the task naming them all,
it made `.gitignore` (first in the list) "the file this is for", and the model dutifully
rewrote `.gitignore` three times. The replies below are those shapes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from projects import PY, do_one_task, make_project, tasks_on_disk

from orchestrator.executors.definers import code_names, defining_files

MONEY = '''"""Money: every amount is an int of euro cents."""


def cents(amount: str) -> int:
    euros, _, part = amount.strip().partition(".")
    return int(euros) * 100 + int(part.ljust(2, "0") or 0)


def format_price(amount_cents: int) -> str:
    euros, rest = divmod(amount_cents, 100)
    return f"€{euros}.{rest:02d}"
'''
CART = '''class Cart:
    def __init__(self) -> None:
        self.lines: dict[str, int] = {}

    def add(self, isbn: str, quantity: int = 1) -> None:
        self.lines[isbn] = self.lines.get(isbn, 0) + quantity
'''
MONEY_TESTS = '''from shop.money import format_price


def test_small_prices():
    assert format_price(1250) == "€12.50"


def test_thousands_are_grouped():
    assert format_price(123456) == "€1,234.56"
'''
FIXED = '''def format_price(amount_cents: int) -> str:
    euros, rest = divmod(amount_cents, 100)
    return f"€{euros:,}.{rest:02d}"
'''
ECHO = ("```\n# Repository files\n\n## .gitignore\n```\n__pycache__/\n.pytest_cache/\n```\n\n"
        "## shop/__init__.py\n```\n```\n\n## tests/test_money.py\n```\nfrom shop.money import format_price\n\n\n"
        "def test_small_prices():\n    assert format_price(1250) == \"€12.50\"\n")
TASK = {
    "id": "T-1", "title": "Show prices with a thousands separator", "status": "open", "priority": 1, "type": "bug",
    "description": ('Prices over €1,000 are hard to read: format_price(123456) shows "€1234.56". Show them as '
                    '"€1,234.56" (a comma every three digits). Smaller prices stay as they are.'),
}
FILES = {"shop/__init__.py": "", "shop/money.py": MONEY, "shop/cart.py": CART, "tests/test_money.py": MONEY_TESTS}
CONFIG = {"testCommands": [f"{PY} -m pytest -q -p no:cacheprovider tests/test_money.py"]}
NAMED = r"Reply with the complete new code of shop/money\.py"


def bookshop(repo: Path, replies: list[dict]) -> Path:
    return make_project(repo, replies, tasks=[TASK], files=FILES, config=CONFIG)


def test_the_first_prompt_names_the_file_that_defines_the_function_the_task_names(git_repo: Path) -> None:
    repo = bookshop(git_repo, [{"match": NAMED, "reply": f"```python\n{FIXED}```\n"}])

    assert do_one_task(repo) == 0

    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert 'return f"€{euros:,}.{rest:02d}"' in (repo / "shop" / "money.py").read_text()
    assert "def cents" in (repo / "shop" / "money.py").read_text()  # the rest of the file kept


def test_after_a_copied_listing_the_retry_still_asks_for_the_file_the_task_is_about(git_repo: Path) -> None:
    retry = r"Attempt 1 could not be applied[\s\S]*The repository's files are: \.gitignore, [\s\S]*" + NAMED
    replies = [
        {"match": retry, "reply": f"```python\n{FIXED}```\n"},
        {"match": "Task T-1", "reply": ECHO, "finish": "length"},  # the listing copied back, cut at the limit
    ]
    repo = bookshop(git_repo, replies)

    assert do_one_task(repo) == 0

    plan = json.loads((repo / ".openagents" / "subtasks" / "T-1.json").read_text())
    outcomes = [a["outcome"] for a in plan["subtasks"][0]["attempts"]]
    assert outcomes == ["edit_failed", "passed"]
    assert (repo / ".gitignore").read_text() == "__pycache__/\n.pytest_cache/\n"


BOOKSHOP = Path(__file__).resolve().parents[2] / "bench" / "backlog" / "template"


@pytest.mark.parametrize(("task_id", "where"), [
    ("T-01", "shop/money.py"), ("T-02", "shop/cart.py"), ("T-03", "shop/catalog.py"), ("T-05", "shop/cart.py"),
    ("T-06", "shop/orders.py"), ("T-10", "shop/orders.py"), ("T-11", "shop/customers.py"),
    ("T-14", "shop/orders.py"), ("T-16", "shop/shipping.py"),
])
def test_backlog_items_are_placed_in_the_file_their_code_lives_in(task_id: str, where: str) -> None:
    lines = (BOOKSHOP / ".openagents" / "tasks.jsonl").read_text().splitlines()
    (item,) = [json.loads(line) for line in lines if f'"{task_id}"' in line]
    listed = sorted(str(p.relative_to(BOOKSHOP)) for p in BOOKSHOP.rglob("*") if p.is_file())

    assert defining_files(BOOKSHOP, f"{item['title']}\n{item['description']}", listed)[0] == where


def test_prose_is_not_taken_for_code() -> None:
    text = "Support found carts holding -2 copies (after a double click). See README.md and money.py."
    assert code_names(text) == []
