"""What judging an attempt in a clean export costs, against running the checks in the tree
the agent left (what goldenloop did before `orchestrator/judging/`).

    .venv/bin/python bench/judge_bench.py [--rounds 7]

Two repositories, each with the change an attempt makes:

- **bookshop**: the backlog benchmark's template (bench/backlog/template/), 6 test files,
  a suite of well under a second;
- **slow suite**: 40 tests that each take 0.1 s, about 4.5 s a run: a suite that takes
  seconds, where the runs are what a user waits for.

and three attempts on each: a change of code only; code and a new test file (a task that
needs no proof); the same for a feature, whose new test must also be seen to fail on the
base's code (a third, small run).

Each attempt is judged both ways, alternately (ABAB: the machine is noisy), `--rounds`
times: **in place** runs the test command in the repository as the attempt left it;
**judged** is `Judge.judge`: the candidate tree written, the export brought to it, the
command run there: once for a change of code; for a change with a test file, the base's
tests over its code and then its own test files alone (and, for a feature whose proof is
its new test, that test on the base's code). Printed: the medians, the milliseconds added
per attempt and the ratio, per kind of attempt.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from orchestrator.checks.settings import CheckSettings  # noqa: E402
from orchestrator.checks.verify import verify  # noqa: E402
from orchestrator.config import RetryConfig  # noqa: E402
from orchestrator.git.repo import Repo  # noqa: E402
from orchestrator.judging.export import JudgeTree  # noqa: E402
from orchestrator.judging.judge import Ground, Judge, judge_base  # noqa: E402

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
SLOW_TEST = "import time\n\n\ndef test_{n}():\n    time.sleep(0.1)\n"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def repository(root: Path, files: dict[str, str], copy_from: Path | None = None) -> Path:
    root.mkdir(parents=True)
    if copy_from is not None:
        shutil.copytree(copy_from, root, dirs_exist_ok=True)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "add", "-A")
    git(root, "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "commit", "-qm", "base")
    return root


Attempts = dict[str, tuple[str, dict[str, str]]]  # kind -> (the task's type, the files it writes)


def bookshop(root: Path) -> tuple[Path, Attempts]:
    repo = repository(root, {}, ROOT / "bench" / "backlog" / "template")
    money = (repo / "shop" / "money.py").read_text()
    code = {"shop/money.py": money + "\n\nHALF = 0.5\n"}
    test = {"tests/test_half.py": "from shop.money import HALF\n\n\ndef test_half():\n    assert HALF == 0.5\n"}
    return repo, {"code only": ("task", code), "code and a new test": ("task", {**code, **test}),
                  "a feature, its new test": ("feature", {**code, **test})}


def slow_suite(root: Path) -> tuple[Path, Attempts]:
    files = {f"tests/test_slow_{n}.py": SLOW_TEST.format(n=n) for n in range(40)}
    repo = repository(root, {"app.py": "VALUE = 1\n", **files})
    code = {"app.py": "VALUE = 2\n"}
    test = {"tests/test_value.py": "from app import VALUE\n\n\ndef test_value():\n    assert VALUE == 2\n"}
    return repo, {"code only": ("task", code), "code and a new test": ("task", {**code, **test}),
                  "a feature, its new test": ("feature", {**code, **test})}


async def judged(judge: Judge, changed: list[str]) -> None:
    await judge.judge(changed)


def timed(step: Callable[[], Coroutine[Any, Any, Any]]) -> float:
    started = time.perf_counter()
    asyncio.run(step())
    return time.perf_counter() - started


def measure(name: str, repo: Path, attempts: Attempts, rounds: int, test_dirs: str) -> None:
    checks = CheckSettings(tests=(f"{PYTEST} {test_dirs}",), timeout_s=600)
    git_repo = Repo(repo)
    tree = JudgeTree(git_repo)
    ground = Ground(git_repo, tree, checks, RetryConfig(flaky_reruns=0))
    try:
        base_tree = git_repo.tree_of("HEAD")
        baseline = asyncio.run(judge_base(ground, base_tree, ""))
        for kind, (task_type, files) in attempts.items():
            for path, text in files.items():
                (repo / path).write_text(text)
            judge = Judge(ground, baseline, base_tree=base_tree, task_text="", task_type=task_type, final=True)
            in_place, export = [], []
            for _ in range(rounds):
                in_place.append(timed(lambda: verify(repo, checks)))
                export.append(timed(lambda: judged(judge, sorted(files))))
            git(repo, "checkout", "-q", "--", ".")
            git(repo, "clean", "-qfd")
            before, after = statistics.median(in_place), statistics.median(export)
            print(f"{name:11} | {kind:23} | {before * 1000:8.0f} | {after * 1000:8.0f} | "
                  f"{(after - before) * 1000:+8.0f} | {after / before:5.2f}")
    finally:
        tree.remove()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    rounds = parser.parse_args().rounds
    print(f"median of {rounds} rounds, each way, alternately (ms)")
    print(f"{'repository':11} | {'attempt':23} | {'in place':>8} | {'judged':>8} | {'added':>8} | ratio")
    with tempfile.TemporaryDirectory(prefix="goldenloop-judge-bench-") as tmp:
        repo, attempts = bookshop(Path(tmp) / "bookshop")
        measure("bookshop", repo, attempts, rounds, "tests")
        repo, attempts = slow_suite(Path(tmp) / "slow")
        measure("slow suite", repo, attempts, rounds, "tests")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
