"""What does retry intelligence save? Model calls, tokens and outcomes, with and without it.

Five small scenarios, each a fresh repository with real pytest checks and the scripted
model, are run through `do-one-task` (in-process) twice: with the default `retry`
settings, and with every retry feature switched off. The figures come from each run's
log (`model_call` events), so they are what a user would be billed for.

- environment: the test runner is not installed.
- flaky:       a test fails once on the fixed code and passes when rerun.
- plateau:     the model keeps sending the same almost-right fix.
- one-reflect: an ordinary bug, fixed on the retry after one reflection.
- regression:  the second attempt is worse than the first; shown the first attempt's
               tree again, the model finishes the fix, while on the worse tree it keeps
               repeating the worse edit.

The scripted model answers by what the prompt says, as a real one would be steered by it;
that is the assumption behind the plateau and regression rows.

    .venv/bin/python bench/retry_bench.py
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchkit import git, init_repo

PY = sys.executable
PYTEST = f"{PY} -m pytest -q -p no:cacheprovider"

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
CALC_TESTS = """from calc import add, mul


def test_add():
    assert add(2, 3) == 5


def test_add_negative():
    assert add(-1, -1) == -2


def test_mul():
    assert mul(3, 4) == 12
"""
FIXED = CALC.replace("return a - b", "return a + b")
ABS = CALC.replace("return a - b", "return abs(a) + abs(b)")  # 2 of 3 tests pass
ZERO = CALC.replace("return a - b", "return 0")  # 1 of 3 tests passes
REFLECTION = json.dumps({
    "category": "edge_case",
    "analysis": "add used abs() so add(-1, -1) returned 2 instead of -2.",
    "suggestion": "Return a + b without abs so negative numbers keep their sign.",
    "actionItems": ["Remove abs() from add in calc.py"],
    "confidence": 0.8,
})
EVERYTHING_OFF = {
    "preflight": False, "flakyReruns": 0, "routeByFailure": False, "stopOnPlateau": False,
    "stopOnOscillation": False, "rollbackRegressions": False,
    "testIntegrity": False,
}


def write_file(path: str, text: str) -> str:
    return f"{path}\n<<<<<<< FILE\n{text}>>>>>>> FILE\n"


def search_replace(path: str, old: str, new: str) -> str:
    return f"{path}\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n"


def flaky_test(marker: Path) -> str:
    """Fails once, on the first run that sees add() fixed; the marker sits outside the repo."""
    return (
        "from pathlib import Path\n\nfrom calc import add\n\n\n"
        "def test_add_is_stable():\n"
        f"    marker = Path({str(marker)!r})\n"
        "    if add(2, 3) == 5 and not marker.exists():\n"
        "        marker.write_text('failed once')\n"
        "        raise AssertionError('a shared resource was busy')\n"
    )


REFLECT = {"match": "Failure digest", "reply": REFLECTION, "times": None}


def _execute(reply: str, match: str = "Task T-1", times: int | None = None) -> dict[str, Any]:
    return {"match": match, "reply": reply, "times": times}


@dataclass(frozen=True)
class Scenario:
    name: str
    replies: Callable[[Path], list[dict[str, Any]]]
    files: Callable[[Path], dict[str, str]] = lambda _: {}
    test_command: str = f"{PYTEST} test_calc.py"


SCENARIOS = [
    Scenario("environment", lambda _: [REFLECT, _execute(write_file("calc.py", FIXED))],
             test_command="no-such-test-runner --all"),
    Scenario("flaky", lambda _: [REFLECT, _execute(write_file("calc.py", FIXED))],
             files=lambda root: {"test_stable.py": flaky_test(root / "flaky.marker")},
             test_command=f"{PYTEST} test_calc.py test_stable.py"),
    Scenario("plateau", lambda _: [REFLECT, _execute(write_file("calc.py", ABS))]),
    Scenario("one-reflect", lambda _: [
        REFLECT,
        _execute(search_replace("calc.py", "    return abs(a) + abs(b)", "    return a + b"),
                 match=r"Reflections from Previous Attempts[\s\S]*add used abs\(\)"),
        _execute(write_file("calc.py", ABS), times=1),
    ]),
    Scenario("regression", lambda _: [
        REFLECT,
        _execute(search_replace("calc.py", "    return abs(a) + abs(b)", "    return a + b"),
                 match="put back to attempt 1's changes"),
        _execute(write_file("calc.py", ABS), times=1),
        _execute(write_file("calc.py", ZERO)),
    ]),
]


def make_repo(root: Path, scenario: Scenario, retry: dict[str, Any]) -> Path:
    repo = root / "repo"
    meta = init_repo(repo) / ".openagents"
    files = {"calc.py": CALC, "test_calc.py": CALC_TESTS, ".gitignore": "__pycache__/\n",
             **scenario.files(root)}
    for name, text in files.items():
        (repo / name).write_text(text)
    task = {"id": "T-1", "title": "Fix add", "status": "open", "priority": 1,
            "description": "add() in calc.py returns the wrong result; make the tests pass.",
            "createdAt": "2026-01-01T00:00:00Z"}
    (meta / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    (meta / "script.json").write_text(json.dumps({"replies": scenario.replies(root)}))
    config = {"testCommands": [scenario.test_command], "defaultModel": "scripted/.openagents/script.json",
              "decomposeMinChars": 0, "retry": retry}
    (meta / "project.json").write_text(json.dumps(config))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "scenario")
    return repo


@dataclass
class Figures:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    attempts: int = 0
    outcome: str = "?"
    seconds: float = 0.0

    def add(self, other: Figures) -> None:
        self.calls += other.calls
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.attempts += other.attempts
        self.seconds += other.seconds


def read_figures(repo: Path, seconds: float) -> Figures:
    from orchestrator.layout import Layout
    from orchestrator.runlog import read_events

    events = [e for path in sorted(Layout(repo).runs.glob("*.jsonl")) for e in read_events(path)]
    calls = [e for e in events if e["event"] == "model_call"]
    status = json.loads(Layout(repo).tasks.read_text().splitlines()[0])["status"]
    why = next((e.get("convergence") for e in reversed(events)
                if e["event"] in ("escalated", "task_blocked", "task_reopened")), None)
    return Figures(
        calls=len(calls),
        input_tokens=sum(e.get("inputTokens") or 0 for e in calls),
        output_tokens=sum(e.get("outputTokens") or 0 for e in calls),
        attempts=sum(e["event"] == "attempt_started" for e in events),
        outcome=f"{status} ({why or 'passed'})",
        seconds=seconds,
    )


def run_scenario(scenario: Scenario, retry: dict[str, Any]) -> Figures:
    from orchestrator.cli import do_one_task_main

    with tempfile.TemporaryDirectory(prefix="retry-bench-") as tmp:
        repo = make_repo(Path(tmp), scenario, retry)
        started = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            do_one_task_main(["--dir", str(repo)])
        return read_figures(repo, time.perf_counter() - started)


def row(name: str, on: Figures, off: Figures) -> str:
    def cells(f: Figures) -> str:
        return (f"{f.calls:>5} {f.input_tokens:>7} {f.output_tokens:>6} {f.attempts:>4} "
                f"{f.seconds:>6.1f}  {f.outcome:<22}")
    return f"{name:<12} | {cells(on)} | {cells(off)}"


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    # The scenarios' own pytest runs need none of this environment's plugins.
    os.environ.setdefault("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    from reflection.scripted import register_scripted_provider

    register_scripted_provider()  # litellm's import is a start-up cost, not a scenario's
    head = f"{'calls':>5} {'in tok':>7} {'out':>6} {'att':>4} {'time s':>6}  {'outcome':<22}"
    print(f"{'':<12} | {'with retry intelligence':<{len(head)}} | every retry feature off")
    print(f"{'scenario':<12} | {head} | {head}")
    print("-" * (15 + 2 * len(head) + 3))
    total_on, total_off = Figures(outcome=""), Figures(outcome="")
    for scenario in SCENARIOS:
        on, off = run_scenario(scenario, {}), run_scenario(scenario, EVERYTHING_OFF)
        total_on.add(on)
        total_off.add(off)
        print(row(scenario.name, on, off))
    print("-" * (15 + 2 * len(head) + 3))
    print(row("total", total_on, total_off))
    saved = total_off.calls - total_on.calls
    tokens_on = total_on.input_tokens + total_on.output_tokens
    tokens_off = total_off.input_tokens + total_off.output_tokens
    print(f"\nmodel calls saved: {saved} of {total_off.calls} ({saved / total_off.calls:.0%}); "
          f"tokens saved: {tokens_off - tokens_on} of {tokens_off} "
          f"({(tokens_off - tokens_on) / tokens_off:.0%})")


if __name__ == "__main__":
    main()
