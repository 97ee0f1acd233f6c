"""Build real repositories with a backlog, a config and a model script, for loop tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

from orchestrator.layout import Layout
from orchestrator.runlog import read_events

PY = sys.executable

CALC = '''def add(a, b):
    return a - b


def mul(a, b):
    return a * b
'''

CALC_TESTS = '''from calc import add, mul


def test_add():
    assert add(2, 3) == 5


def test_add_negative():
    assert add(-1, -1) == -2


def test_mul():
    assert mul(3, 4) == 12
'''

FIX_ADD = """calc.py
<<<<<<< SEARCH
    return a - b
=======
    return a + b
>>>>>>> REPLACE
"""

WRONG_ADD = """calc.py
<<<<<<< SEARCH
    return a - b
=======
    return abs(a) + abs(b)
>>>>>>> REPLACE
"""

REFLECTION = json.dumps(
    {
        "category": "edge_case",
        "analysis": "add used abs() so add(-1, -1) returned 2 instead of -2.",
        "suggestion": "Return a + b without abs so negative numbers keep their sign.",
        "actionItems": ["Remove abs() from add in calc.py"],
        "confidence": 0.8,
    }
)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def task(task_id: str = "T-1", title: str = "Fix add", **extra: Any) -> dict[str, Any]:
    body = {
        "id": task_id,
        "title": title,
        "description": "add() in calc.py returns the wrong result; make tests pass.",
        "status": "open",
        "priority": 1,
        "type": "bug",
        "labels": [],
        "deps": [],
        "createdAt": "2026-11-01T09:00:00Z",
        "updatedAt": "2026-11-01T09:00:00Z",
        "commits": [],
    }
    body.update(extra)
    return body


def make_project(
    repo: Path,
    replies: list[dict[str, Any]],
    *,
    tasks: list[dict[str, Any]] | None = None,
    config: dict[str, Any] | None = None,
    files: dict[str, str] | None = None,
    pricing: dict[str, float] | None = None,
    script_extra: dict[str, Any] | None = None,
) -> Path:
    """Write calc.py, its tests, the backlog, project.json and the script; commit them.

    `pricing` (the script's per-token prices) makes every model call's cost known.
    """
    for name, text in {"calc.py": CALC, "test_calc.py": CALC_TESTS, **(files or {})}.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    meta = repo / ".openagents"
    meta.mkdir(exist_ok=True)
    lines = [orjson.dumps(t).decode() for t in (tasks or [task()])]
    (meta / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    script: dict[str, Any] = {"replies": replies}
    if pricing is not None:
        script["pricing"] = pricing
    script.update(script_extra or {})  # the script's other keys (promptCache, its own pricing)
    (meta / "script.json").write_text(json.dumps(script, indent=1))
    settings = {
        "testCommands": [f"{PY} -m pytest -q -p no:cacheprovider test_calc.py"],
        "defaultModel": "scripted/.openagents/script.json",
        "decomposeMinChars": 0,
        "reflexion": {"maxRetries": 3},
    }
    for key, value in (config or {}).items():
        if value is None:  # a key the test leaves unset
            settings.pop(key, None)
        elif isinstance(value, dict) and isinstance(settings.get(key), dict):
            settings[key] = {**settings[key], **value}
        else:
            settings[key] = value
    executor = settings.get("executor")
    if isinstance(executor, dict) and executor.get("kind", "builtin") != "builtin":
        # The test's agents keep their state beside the repository: theirs to write, as a
        # user's agent writes its own folders (the sandbox's own tests grant nothing extra).
        executor.setdefault("writable", [str(repo.parent)])
    (meta / "project.json").write_text(json.dumps(settings, indent=1))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "project under test")
    return repo


def tasks_on_disk(repo: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for line in (repo / ".openagents" / "tasks.jsonl").read_text().splitlines():
        try:
            body = json.loads(line)
        except json.JSONDecodeError:
            continue
        out[body["id"]] = body
    return out


def run_events(repo: Path) -> list[dict[str, Any]]:
    """Every event of every run in the repository, in the order they happened (two runs
    started in the same second have run ids that do not sort by time)."""
    events = [e for path in sorted(Layout(repo).runs.glob("*.jsonl")) for e in read_events(path)]
    return sorted(events, key=lambda e: e.get("ts", ""))  # stable: a run's own order is kept


# -- several modules, each tested only once it exists ---------------------------------
# With one project-wide test command, a backlog of independent tasks needs tests that
# pass before a task has run and judge its module once it exists: importorskip does that.

FEATURE_TESTS = """import pytest


def test_greet():
    greet = pytest.importorskip("greet")
    assert greet.hello("ann") == "hello ann"


def test_negate():
    negate = pytest.importorskip("negate")
    assert negate.neg(2) == -2
    assert negate.neg(-3) == 3


def test_clamp():
    clamp = pytest.importorskip("clamp")
    assert clamp.clamp(5, 0, 3) == 3
    assert clamp.clamp(-1, 0, 3) == 0
"""

FEATURE_TEST_COMMAND = f"{PY} -m pytest -q -p no:cacheprovider test_features.py"


def write_file(path: str, text: str) -> str:
    """An edit reply that writes the whole file `path`."""
    return f"{path}\n<<<<<<< FILE\n{text}>>>>>>> FILE\n"


def init_repo(repo: Path) -> Path:
    """A fresh repository with one commit, on branch main (like the `git_repo` fixture)."""
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.invalid")
    git(repo, "config", "user.name", "goldenloop tests")
    git(repo, "config", "commit.gpgsign", "false")
    (repo / "README.md").write_text("# sample\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "initial")
    return repo


def run_summaries(repo: Path) -> list[dict[str, Any]]:
    """Every `runs/<runId>-summary.json` of the repository, oldest run first."""
    paths = sorted((repo / ".openagents" / "runs").glob("*-summary.json"))
    return [json.loads(path.read_text()) for path in paths]


def memory_lines(repo: Path) -> list[dict[str, Any]]:
    """The reflections file, parsed strictly: a torn or invalid line fails the test."""
    path = repo / ".openagents" / "memory" / "reflections.jsonl"
    if not path.exists():
        return []
    data = path.read_bytes()
    assert not data or data.endswith(b"\n"), "the last reflection line is not terminated"
    return [orjson.loads(line) for line in data.splitlines()]


def reflection_lines(repo: Path) -> list[dict[str, Any]]:
    """The attempt reflections (seed 004's records), in file order."""
    return [line for line in memory_lines(repo) if "kind" not in line]


def outcome_lines(repo: Path) -> list[dict[str, Any]]:
    """The outcome reflections tasks left when they ended (seed 001), in file order."""
    return [line for line in memory_lines(repo) if line.get("kind") == "outcome"]


# -- retry intelligence: calc variants, run-log queries ---------------------------------

CALC_FIXED = CALC.replace("return a - b", "return a + b")
CALC_ABS = CALC.replace("return a - b", "return abs(a) + abs(b)")  # 2 of 3 tests pass
CALC_ZERO = CALC.replace("return a - b", "return 0")  # 1 of 3 tests passes
CALC_HANG = CALC.replace("return a - b", "while True:\n        pass")  # the tests never end


def events_of(repo: Path, kind: str, task_id: str | None = None) -> list[dict[str, Any]]:
    """The run-log events of one kind, oldest first (of one task when `task_id` is given)."""
    return [
        e
        for e in run_events(repo)
        if e["event"] == kind and (task_id is None or e.get("taskId") == task_id)
    ]


def model_calls(repo: Path, purpose: str | None = None) -> int:
    """How many model calls the run logs record (of one purpose: execute, reflect, decompose)."""
    return sum(purpose is None or e.get("purpose") == purpose for e in events_of(repo, "model_call"))


def flaky_tests(marker: Path) -> str:
    """A test file whose test fails once, on the first run that sees add() fixed.

    The marker lives outside the repository, so the attempt's tree and commit stay clean;
    the first failing run creates it and every later run passes.
    """
    return f'''from pathlib import Path

from calc import add


def test_add_is_stable():
    marker = Path({str(marker)!r})
    if add(2, 3) == 5 and not marker.exists():
        marker.write_text("failed once")
        raise AssertionError("a shared resource was busy")
'''


def do_one_task(repo: Path, *args: str) -> int:
    """`do-one-task --dir <repo> ...`, in this process; returns the exit code."""
    from orchestrator.cli import do_one_task_main

    return do_one_task_main(["--dir", str(repo), *args])


def goldenloop(repo: Path, command: str, *args: str) -> int:
    """`goldenloop COMMAND ... --dir <repo>`, in this process; returns the exit code."""
    from orchestrator.cli import main

    return main([command, *args, "--dir", str(repo)])


def outcome_record(n: int, **extra: object) -> dict[str, Any]:
    """A task's outcome line of reflections.jsonl (a failed one), as the memory commands read it."""
    return {"id": f"R-{n}", "kind": "outcome", "outcome": "failed", "sessionId": "s", "taskId": f"T-{n}",
            "agent": "coder", "title": f"parse dates in report {n}", "createdAt": f"2026-10-{n + 1:02d}T08:00:00Z",
            "files": ["src/report.py"], "labels": [], "whatWentWrong": "The parser dropped the timezone.",
            "whatToDoDifferently": f"Keep the timezone when parsing ISO dates of report {n}.",
            "tacticalRule": "Always parse dates with their timezone.", "source": "heuristic", **extra}


def judged_in(parts: Any, home: Path) -> dict[str, Any]:
    """What a `SubtaskRun` built by hand needs to judge its attempts: a judge's tree under
    `home` (the test's own folder, removed with it), against the tree of HEAD."""
    from orchestrator.judging.export import JudgeTree
    from orchestrator.judging.judge import Ground

    home.mkdir(exist_ok=True)
    tree = JudgeTree(parts.repo, home=home)
    return {"ground": Ground.of(parts.repo, tree, parts.config), "base_tree": parts.repo.tree_of("HEAD"), "final": True}
