"""What a user waits for besides the model: the project's suite, per task.

A repository with a 40-test pytest suite (each test sleeps, so the suite takes a known
time) whose conftest counts the tests each session ran, and a stand-in agent (a Python
script, no model). Each case runs three ways, in turns, on fresh copies:

- a plain retry loop (what `aider --test-cmd` does): the agent, then the suite, until it passes;
- `do-one-task` of the code under `--before` (a tree from `git archive`), if given;
- `do-one-task` of this tree.

It prints, per case, the suite runs (tests run / tests in the suite, a test run in a
forked copy of a session counted too), the pytest sessions, and the wall time over the
loop's, medians of the paired ratios.

    .venv/bin/python bench/suite_bench.py [--pairs 3] [--sleep 0.1] [--before /tmp/main]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TESTS = 40
# One line per test run, naming its session (a forked copy of a session names the same).
CONFTEST = '''import os
import uuid

SESSION = uuid.uuid4().hex


def pytest_runtest_call(item):
    with open(os.environ["SUITE_SESSIONS"], "a") as log:
        log.write(SESSION + "\\n")
'''
# attempt n writes add() right from the `good`-th attempt on; `breaks`: one test of mul() broken on the first
AGENT = '''import pathlib, sys
count = pathlib.Path(sys.argv[1])
n = int(count.read_text()) + 1 if count.exists() else 1
count.write_text(str(n))
good, breaks = int(sys.argv[2]), sys.argv[3] == "1"
add = "a + b" if n >= good else "abs(a) + abs(b)"
mul = "a * b + (a == 0)" if breaks and n == 1 else "a * b"  # test_mul_0 alone breaks
pathlib.Path("calc.py").write_text(f"def add(a, b):\\n    return {add}\\n\\n\\ndef mul(a, b):\\n    return {mul}\\n")
'''
CASES = {"fixed at attempt 1": (1, False), "fixed at attempt 2 (wrong fix first)": (2, False),
         "attempt 1 breaks a test, fixed at 2": (1, True), "blocked after 3 attempts": (9, False)}
TEST_COMMAND = "python3 -m pytest -q -p no:cacheprovider"


def make_repo(folder: Path, sleep: float, good: int, breaks: bool) -> Path:
    repo = folder / "repo"
    repo.mkdir(parents=True)
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n")
    (repo / "conftest.py").write_text(CONFTEST)
    body = ["import time", "from calc import add, mul", "", "def test_add():\n    assert add(2, 3) == 5",
            "def test_add_negative():\n    assert add(-1, -1) == -2"]
    body += [f"def test_mul_{n}():\n    time.sleep({sleep})\n    assert mul({n}, 2) == {2 * n}"
             for n in range(TESTS - 2)]
    (repo / "test_calc.py").write_text("\n\n\n".join(body) + "\n")
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    (folder / "agent.py").write_text(AGENT)
    agent = f"python3 {folder / 'agent.py'} {folder / 'count'} {good} {int(breaks)}"
    meta = repo / ".openagents"
    meta.mkdir()
    (meta / "tasks.jsonl").write_text(
        '{"id":"T-1","title":"Fix add","description":"add() in calc.py is wrong; make the tests pass.",'
        '"status":"open","priority":1,"type":"bug","labels":[],"deps":[],"commits":[],'
        '"createdAt":"2026-11-01T09:00:00Z","updatedAt":"2026-11-01T09:00:00Z"}\n')
    (meta / "project.json").write_text(
        '{"testCommands": ["%s"], "decomposeMinChars": 0, "reflexion": {"useLLM": false, "maxRetries": 3},'
        ' "executor": {"kind": "command", "command": "%s {prompt_file}", "writable": ["%s"]}}'
        % (TEST_COMMAND, agent, folder))
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["-c", "user.name=b", "-c", "user.email=b@b",
                                                                "commit", "-qm", "suite"]):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    return repo


def plain_loop(folder: Path, repo: Path, good: int, breaks: bool) -> None:
    for _ in range(3):
        subprocess.run(["python3", str(folder / "agent.py"), str(folder / "count"), str(good), str(int(breaks))],
                       cwd=repo, check=True)
        if subprocess.run(TEST_COMMAND, shell=True, cwd=repo, capture_output=True).returncode == 0:
            return


def goldenloop(code: Path, repo: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(code), "GOLDENLOOP_NO_COLOR": "1"}
    subprocess.run([sys.executable, "-m", "orchestrator.cli", "do-one-task", "--dir", str(repo)], cwd=code, env=env,
                   capture_output=True, check=False)


def measure(side: str, code: Path | None, sleep: float, good: int, breaks: bool) -> tuple[float, float, int]:
    """Wall seconds, suite runs (tests run over the suite's size) and pytest sessions."""
    folder = Path(tempfile.mkdtemp(prefix="suite-bench-"))
    try:
        repo = make_repo(folder, sleep, good, breaks)
        os.environ["SUITE_SESSIONS"] = str(folder / "sessions")
        started = time.monotonic()
        if code is None:
            plain_loop(folder, repo, good, breaks)
        else:
            goldenloop(code, repo)
        wall = time.monotonic() - started
        lines = (folder / "sessions").read_text().split() if (folder / "sessions").exists() else []
        return wall, len(lines) / TESTS, len(set(lines))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--sleep", type=float, default=0.1)
    parser.add_argument("--before", type=Path, help="a tree of the code before (git archive), compared in turns")
    parser.add_argument("--case", default="", help="only the cases whose name holds this")
    args = parser.parse_args()
    here = Path(__file__).resolve().parents[1]
    sides = {"loop": None, **({"before": args.before.resolve()} if args.before else {}), "after": here}
    for case, (good, breaks) in [(c, how) for c, how in CASES.items() if args.case in c]:
        figures: dict[str, list[tuple[float, float, int]]] = {side: [] for side in sides}
        for pair in range(args.pairs):
            order = list(sides.items())
            for side, code in order[pair % len(order):] + order[:pair % len(order)]:
                figures[side].append(measure(side, code, args.sleep, good, breaks))
        loop = figures["loop"]
        print(f"{case}: loop {statistics.median(w for w, _, _ in loop):.1f} s, "
              f"suite runs {statistics.median(r for _, r, _ in loop):.2f}")
        for side in sides:
            if side == "loop":
                continue
            ratios = [w / lw for (w, _, _), (lw, _, _) in zip(figures[side], loop, strict=True)]
            runs = statistics.median(r for _, r, _ in figures[side])
            sessions = statistics.median(n for _, _, n in figures[side])
            print(f"  {side}: suite runs {runs:.2f} in {sessions:g} pytest session(s), "
                  f"wall / loop {statistics.median(ratios):.2f} "
                  f"(pairs {', '.join(f'{r:.2f}' for r in ratios)})")


if __name__ == "__main__":
    main()
