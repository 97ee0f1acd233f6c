"""A small shop's repository for the judge's cases: a real bug whose failing tests are
written (`add` in calc.py), a module a feature grows (todo.py), a README, and a backlog.
The scripted model answers the way models write: a sentence, then edit blocks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
from projects import CALC, CALC_TESTS, PY, git, task

CALC_FIXED = CALC.replace("return a - b", "return a + b")
TODO = '''def add_item(items, name):
    """The list with `name` at its end."""
    return [*items, name]
'''
TODO_TESTS = '''from todo import add_item


def test_add_item():
    assert add_item(["milk"], "eggs") == ["milk", "eggs"]
'''
README = "# shop\n\nHelpers for a small shop.\n"
ADD = "tests/test_calc.py::test_add"
ADD_NEGATIVE = "tests/test_calc.py::test_add_negative"
TEST_COMMAND = f"{PY} -m pytest -q -p no:cacheprovider tests"

BUG = task("T-1", "Fix add", description="add() in calc.py returns a - b; tests/test_calc.py fails.", type="bug")
FEATURE = task("T-2", "Add reorder_list", type="feature", priority=2,
               description="Add reorder_list(items, order) to todo.py: the items in the given order, with tests.")


def whole(path: str, text: str, why: str = "Here is the file.") -> str:
    """A reply that writes a whole file."""
    return f"{why}\n\n{path}\n<<<<<<< FILE\n{text}>>>>>>> FILE\n"


def swap(path: str, old: str, new: str, why: str = "Here is the change.") -> str:
    """A reply with one SEARCH/REPLACE block."""
    return f"{why}\n\n{path}\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n"


FIX = swap("calc.py", "    return a - b", "    return a + b", "add subtracts instead of adding.")
COMMENT = swap("calc.py", "def add(a, b):", "def add(a, b):\n    # the sum of a and b", "Documenting add first.")
REORDER = TODO + '''

def reorder_list(items, order):
    """The items at the positions `order` names, in that order."""
    return [items[i] for i in order]
'''
HALF_REORDER = TODO + '''

def reorder_list(items, order):
    """Not reordered yet."""
    return list(items)
'''
REORDER_TESTS = '''from todo import reorder_list


def test_reorder_list():
    assert reorder_list(["a", "b", "c"], [2, 0, 1]) == ["c", "a", "b"]
'''


def make_shop(repo: Path, replies: list[dict[str, Any]], *, tasks: list[dict[str, Any]] | None = None,
              config: dict[str, Any] | None = None, files: dict[str, str] | None = None,
              ignore: str = "") -> Path:
    """Write the shop into `repo` (a fresh repository) and commit it."""
    base = {"calc.py": CALC, "tests/test_calc.py": CALC_TESTS, "todo.py": TODO, "tests/test_todo.py": TODO_TESTS,
            "README.md": README, ".gitignore": "__pycache__/\n.pytest_cache/\n" + ignore}
    for name, text in {**base, **(files or {})}.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    meta = repo / ".openagents"
    meta.mkdir(exist_ok=True)
    (meta / "tasks.jsonl").write_text("".join(orjson.dumps(t).decode() + "\n" for t in (tasks or [BUG])))
    (meta / "script.json").write_text(json.dumps({"replies": replies}, indent=1))
    settings: dict[str, Any] = {"testCommands": [TEST_COMMAND], "defaultModel": "scripted/.openagents/script.json",
                                "decomposeMinChars": 0, "reflexion": {"maxRetries": 0, "useLLM": False}}
    for key, value in (config or {}).items():
        settings[key] = {**settings[key], **value} if isinstance(settings.get(key), dict) else value
    (meta / "project.json").write_text(json.dumps(settings, indent=1))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the shop")
    return repo


def committed(repo: Path, since: str) -> list[str]:
    """Every path a commit since `since` touched, outside .openagents/."""
    paths = git(repo, "log", "--name-only", "--format=", f"{since}..HEAD").split()
    return sorted({p for p in paths if not p.startswith(".openagents/")})


def pytest_fails(repo: Path) -> list[str]:
    """What the user's own pytest says on the checkout afterwards: the failing test ids."""
    import re
    import subprocess

    done = subprocess.run([PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", "tests"], cwd=repo,
                          capture_output=True, text=True, env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PATH": ""})
    return sorted(re.findall(r"^FAILED (\S+)", done.stdout, re.M))
