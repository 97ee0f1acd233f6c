"""The demo: copy examples/demo/project to a temporary folder, make it a git repository,
and run `do-one-task` on it with the scripted model, offline.

The scripted model answers from `.openagents/demo-model.json`: its first attempt at the
task is wrong, the tests fail, the reflection says why, and the retry passes. Nothing in
this checkout is modified; the copy is left in the temporary folder for you to inspect.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "demo" / "project"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout


def make_repository(target: Path) -> Path:
    shutil.copytree(SOURCE, target)
    git(target, "init", "-q", "-b", "main")
    git(target, "config", "user.name", "goldenloop demo")
    git(target, "config", "user.email", "demo@goldenloop.invalid")
    git(target, "config", "commit.gpgsign", "false")
    git(target, "add", "-A")
    git(target, "commit", "-q", "-m", "A blog helper with a backlog")
    return target


def show(title: str, body: str) -> None:
    print(f"\n=== {title} ===\n{body.rstrip()}")


def main(argv: list[str]) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="goldenloop-demo-"))
    repo = make_repository(workdir / "blog")
    print(f"Demo repository: {repo}")
    print("Model: the scripted model (answers from .openagents/demo-model.json; no network)\n")
    # The project's test command says `python`: make that the interpreter running us.
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")

    from orchestrator.cli import do_one_task_main

    code = do_one_task_main(["--dir", str(repo), *argv])

    reflections = repo / ".openagents" / "memory" / "reflections.jsonl"
    if reflections.exists():
        records = [json.loads(line) for line in reflections.read_text().splitlines()]
        show(f"What the memory kept, in {reflections.relative_to(repo)} (JSON lines)", remembered(records))
    show("git log", git(repo, "log", "--oneline", "--stat", "-n", "3"))
    show("slug.py after the run", (repo / "slug.py").read_text())
    print(f"\nExit code {code}. To look further:")
    print(f"  goldenloop show DEMO-1 --dir {repo}      # the task: attempts, reflections, commits")
    print(f"  goldenloop report --open --dir {repo}    # the run's report, in your browser")
    return code


def remembered(records: list[dict]) -> str:
    """The reflections the run wrote, a few lines each (the file holds every field)."""
    lines = []
    for r in records:
        if r.get("kind") == "outcome":
            lines.append(f"- {r['outcome']} of {r['taskId']}: {r.get('strategy') or r.get('whatWentWrong')}")
            lines += [f"    {n}. {step}" for n, step in enumerate(r.get("procedure") or [], 1)]
        else:
            lines.append(f"- attempt {r['attemptNumber']} of {r['subtaskId']} [{r['category']}]: {r['analysis']}")
            lines.append(f"    next time: {r['suggestion']}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
