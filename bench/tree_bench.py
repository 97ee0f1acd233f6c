"""Linear reflexion against the tree search (`retry.strategy: "tree"`), offline.

Each scenario is a fresh repository with real pytest checks, run through `do-one-task`
(in-process) once with `retry.strategy` "linear" (the default) and once with "tree"
(width 2, depth 2), both with the default four attempts. The figures come from each
run's log: attempts started, model calls (attempts, reflections and re-asks), and how the
task ended.

- dead-end:  the first attempt's direction is wrong (abs() on both operands: 2 of 3 tests
             pass). Shown that code and asked to fix it, the model keeps repairing the
             same idea (a new variant each time, still 2 of 3); asked from the subtask's
             start for another approach, it writes the right one.
- refine:    the first direction is right and needs one fix; asked for another approach,
             the model's alternative is worse (1 of 3).
- at-once:   the first attempt passes.

The scripted model answers by what the prompt says, as a real one would be steered by it;
that is the assumption behind the dead-end and refine rows, and the reason to read the
two rows together: the tree search pays an attempt where the first direction was right
to save the task where it was not.

    .venv/bin/python bench/tree_bench.py
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # a plain checkout works too

from retry_bench import (  # noqa: E402 - bench/ is the script's folder, so on sys.path
    ABS,
    CALC,
    FIXED,
    REFLECT,
    ZERO,
    Figures,
    Scenario,
    make_repo,
    read_figures,
    search_replace,
    write_file,
)

RETRY_BLOCK = r"## Attempt \d+ failed\n"  # a linear retry, or the tree expanding a node
OTHER_WAY = "try another way"  # the tree's next candidate from the same start
# Other ways to write the wrong idea: each still passes 2 of 3 tests, none repeats another.
VARIANTS = [CALC.replace("return a - b", body) for body in (
    "return abs(a + b)", "return abs(a) + b", "return a + b if a > 0 else abs(a + b)")]
LINEAR: dict[str, Any] = {}
TREE = {"strategy": "tree", "treeWidth": 2, "treeDepth": 2}


def reply(text: str, match: str = "Task T-1", times: int | None = None) -> dict[str, Any]:
    return {"match": match, "reply": text, "times": times}


SCENARIOS = [
    Scenario("dead-end", lambda _: [
        REFLECT,
        reply(write_file("calc.py", FIXED), match=OTHER_WAY),
        *[reply(write_file("calc.py", variant), match=RETRY_BLOCK, times=1) for variant in VARIANTS],
        reply(write_file("calc.py", ABS)),
    ]),
    Scenario("refine", lambda _: [
        REFLECT,
        reply(write_file("calc.py", ZERO), match=OTHER_WAY),
        reply(search_replace("calc.py", "    return abs(a) + abs(b)", "    return a + b"), match=RETRY_BLOCK),
        reply(write_file("calc.py", ABS)),
    ]),
    Scenario("at-once", lambda _: [REFLECT, reply(write_file("calc.py", FIXED))]),
]


@dataclass
class Row:
    name: str
    linear: Figures
    tree: Figures


def run(scenario: Scenario, retry: dict[str, Any]) -> Figures:
    from orchestrator.cli import do_one_task_main

    with tempfile.TemporaryDirectory(prefix="tree-bench-") as tmp:
        repo = make_repo(Path(tmp), scenario, retry)
        started = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            do_one_task_main(["--dir", str(repo)])
        return read_figures(repo, time.perf_counter() - started)


def measure() -> list[Row]:
    os.environ.setdefault("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the scenarios' own pytest runs
    from reflection.scripted import register_scripted_provider

    register_scripted_provider()
    return [Row(s.name, run(s, LINEAR), run(s, TREE)) for s in SCENARIOS]


def table(rows: list[Row]) -> str:
    def cells(f: Figures) -> str:
        return f"{f.attempts:>4} {f.calls:>5}  {f.outcome:<24}"

    head = f"{'att':>4} {'calls':>5}  {'outcome':<24}"
    lines = [f"{'':<10} | {'linear (default)':<{len(head)}} | tree (width 2, depth 2)",
             f"{'scenario':<10} | {head} | {head}", "-" * (16 + 2 * len(head))]
    lines += [f"{r.name:<10} | {cells(r.linear)} | {cells(r.tree)}" for r in rows]
    passed = {k: sum(getattr(r, k).outcome.startswith("closed") for r in rows) for k in ("linear", "tree")}
    attempts = {k: sum(getattr(r, k).attempts for r in rows) for k in ("linear", "tree")}
    calls = {k: sum(getattr(r, k).calls for r in rows) for k in ("linear", "tree")}
    lines.append("-" * (16 + 2 * len(head)))
    lines += [f"{k:<6}: {passed[k]} of {len(rows)} tasks closed, {attempts[k]} attempts, {calls[k]} model calls"
              for k in ("linear", "tree")]
    return "\n".join(lines)


def main() -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    print(table(measure()))


if __name__ == "__main__":
    main()
