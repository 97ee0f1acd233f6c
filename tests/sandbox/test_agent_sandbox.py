"""An agent in goldenloop's sandbox, as a user meets it: `do-one-task` on a real repository
with an agent command that fixes the bug and also reaches outside its tree."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from projects import CALC, do_one_task, git, make_project, tasks_on_disk

from orchestrator.sandbox import abi, unavailable_reason

landlock = pytest.mark.skipif(abi() == 0, reason=f"no Landlock here: {unavailable_reason()}")
FIXED = CALC.replace("a - b", "a + b")

# Fixes calc.py, then tries what a careless or hostile agent tries: a file beside the
# repository, and the system's temporary folder; its own TMPDIR is for it to use.
AGENT = """import os, pathlib, sys, tempfile
outside, in_tmp = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[3])
pathlib.Path("calc.py").write_text(pathlib.Path(sys.argv[2]).read_text())
for target in (outside / "stray.txt", in_tmp):
    try:
        target.write_text("written by the agent")
        print("wrote", target)
    except PermissionError:
        print("refused", target)
with tempfile.NamedTemporaryFile("w") as scratch:
    scratch.write("its own temporary file")
    print("temp ok in", os.path.dirname(scratch.name))
"""


def in_tmp(tmp_path: Path) -> Path:
    """A file straight in /tmp, named for this test run (the checkout lies under /tmp here)."""
    return Path("/tmp") / f"goldenloop-test-stray-{tmp_path.parent.name}-{tmp_path.name}.txt"


def sandboxed_project(git_repo: Path, tmp_path: Path, **executor: object) -> tuple[Path, Path]:
    outside = tmp_path / "beside-the-checkout"
    outside.mkdir()
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "fixed.txt").write_text(FIXED)
    command = (f"{sys.executable} {tmp_path / 'agent.py'} {outside} {tmp_path / 'fixed.txt'} {in_tmp(tmp_path)} "
               "{prompt_file}")
    config = {"executor": {"kind": "command", "command": command, "writable": [], **executor},
              "reflexion": {"useLLM": False}}
    return make_project(git_repo, [], config=config), outside


@landlock
def test_an_agent_writes_its_tree_and_nothing_beside_it(git_repo: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    repo, outside = sandboxed_project(git_repo, tmp_path)
    assert do_one_task(repo) == 0
    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    assert git(repo, "show", "HEAD:calc.py") == FIXED
    assert list(outside.iterdir()) == []
    assert not in_tmp(tmp_path).exists()
    said = capsys.readouterr().out
    assert "without a sandbox" not in said and "sandbox is false" not in said


def test_a_project_that_switches_the_sandbox_off_is_told_so_once(git_repo: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    repo, outside = sandboxed_project(git_repo, tmp_path, sandbox=False)
    try:
        assert do_one_task(repo) == 0
        said = capsys.readouterr().out
        assert said.count("executor.sandbox is false: the agent may change any file you can") == 1
        assert (outside / "stray.txt").read_text() == "written by the agent"
    finally:
        in_tmp(tmp_path).unlink(missing_ok=True)


# An agent in a parallel worker's worktree that finds the user's checkout through git and
# tries to change it: a stray file, the README, and a waiver of every test in project.json.
ESCAPING = """import pathlib, subprocess, sys
runs = pathlib.Path(sys.argv[2])
runs.write_text(str(int(runs.read_text() or 0) + 1) if runs.exists() else "1")
common = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
                        capture_output=True, text=True, check=True).stdout.strip()
checkout = pathlib.Path(common).parent
if runs.read_text() == "1":  # its first attempt only
    for name, text in (("stray.txt", "x"), ("README.md", "rewritten"),
                       (".openagents/project.json", '{"checks": {"knownFailures": ["*"]}}')):
        try:
            (checkout / name).write_text(text)
            print("wrote", checkout / name)
        except PermissionError as error:
            print(error)
pathlib.Path("calc.py").write_text(pathlib.Path(sys.argv[1]).read_text())
"""


@landlock
def test_a_parallel_worker_cannot_reach_the_users_checkout(git_repo: Path, tmp_path: Path) -> None:
    from orchestrator.cli import overnight_main

    (tmp_path / "agent.py").write_text(ESCAPING)
    (tmp_path / "fixed.txt").write_text(FIXED)
    runs = tmp_path / "state" / "runs"
    runs.parent.mkdir()
    command = f"{sys.executable} {tmp_path / 'agent.py'} {tmp_path / 'fixed.txt'} {runs} {{prompt_file}}"
    config = {"executor": {"kind": "command", "command": command, "writable": [str(runs.parent)]},
              "reflexion": {"useLLM": False}}
    repo = make_project(git_repo, [], config=config)
    readme, settings = (repo / "README.md").read_bytes(), (repo / ".openagents" / "project.json").read_bytes()

    assert overnight_main([str(repo), "--parallel", "2", "--max-tasks", "1"]) == 0
    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"
    plan = json.loads((repo / ".openagents" / "subtasks" / "T-1.json").read_text())
    first, second = plan["subtasks"][0]["attempts"]
    assert (first["outcome"], second["outcome"]) == ("integrity", "passed")
    assert first["summary"].startswith("rejected: the agent tried to change stray.txt, README.md, "
                                             ".openagents/project.json in your checkout, outside its worktree")
    assert git(repo, "show", "HEAD~1:calc.py") == FIXED or git(repo, "show", "HEAD:calc.py") == FIXED
    assert not (repo / "stray.txt").exists()
    assert (repo / "README.md").read_bytes() == readme
    assert (repo / ".openagents" / "project.json").read_bytes() == settings
    assert git(repo, "status", "--porcelain") == ""


# Does to git what agents do: commits its work, amends your last commit, moves your branch,
# and sets a hook goldenloop's own git would run. In its worktree, the git folder is not its own.
GIT_WRITER = """import pathlib, subprocess, sys
pathlib.Path("calc.py").write_text(pathlib.Path(sys.argv[1]).read_text())
for args in (["commit", "-qam", "the agent's own commit"], ["commit", "-q", "--amend", "-m", "rewritten"],
             ["reset", "-q", "--hard", "HEAD~1"], ["config", "core.hooksPath", "/tmp"]):
    done = subprocess.run(["git", *args], capture_output=True, text=True)
    print("git", args[0], "->", done.returncode, done.stderr.strip()[:200])
"""


@landlock
def test_an_agent_cannot_write_the_git_folder_from_its_worktree(git_repo: Path, tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(GIT_WRITER)
    (tmp_path / "fixed.txt").write_text(FIXED)
    command = f"{sys.executable} {tmp_path / 'agent.py'} {tmp_path / 'fixed.txt'} {{prompt_file}}"
    config = {"executor": {"kind": "command", "command": command, "writable": []}, "reflexion": {"useLLM": False}}
    repo = make_project(git_repo, [], config=config)
    history = git(repo, "log", "--format=%H %s")
    settings = (repo / ".git" / "config").read_bytes()

    assert do_one_task(repo) == 0
    (sha,) = tasks_on_disk(repo)["T-1"]["commits"]
    assert git(repo, "log", "--format=%H %s").endswith(history)  # your history under the task's commits
    assert git(repo, "show", "-s", "--format=%s", sha).strip() == "T-1: Fix add"  # goldenloop's commit, not the agent's
    assert (repo / ".git" / "config").read_bytes() == settings
    transcript = next((repo / ".openagents" / "history" / "T-1").glob("*.transcript.txt")).read_text()
    refused = [line for line in transcript.splitlines() if line.startswith("git ")]
    assert len(refused) == 4 and not [line for line in refused if " -> 0 " in line + " "], refused


# Reads the environment linked into its worktree, and tries to install into it.
INSTALLER = """import pathlib, sys
pathlib.Path("calc.py").write_text(pathlib.Path(sys.argv[1]).read_text())
venv = pathlib.Path(".venv")
print("read:", (venv / "lib" / "site.py").read_text().strip())
for target in (venv / "lib" / "site.py", venv / "lib" / "new_package.py"):
    try:
        with open(target, "a") as handle:
            handle.write("installed by the agent\\n")
        print("wrote", target)
    except PermissionError:
        print("refused", target)
"""


@landlock
def test_a_linked_environment_is_read_only_to_the_agent(git_repo: Path, tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(INSTALLER)
    (tmp_path / "fixed.txt").write_text(FIXED)
    command = f"{sys.executable} {tmp_path / 'agent.py'} {tmp_path / 'fixed.txt'} {{prompt_file}}"
    config = {"executor": {"kind": "command", "command": command, "writable": []}, "reflexion": {"useLLM": False},
              "worktree": {"link": [".venv"]}}
    repo = make_project(git_repo, [], config=config)
    with (repo / ".gitignore").open("a") as ignore:
        ignore.write(".venv/\n")
    git(repo, "commit", "-qam", "an environment of your own, ignored")
    (repo / ".venv" / "lib").mkdir(parents=True)
    (repo / ".venv" / "lib" / "site.py").write_text("# your environment\n")

    assert do_one_task(repo) == 0
    assert git(repo, "show", "HEAD~1:calc.py") == FIXED or git(repo, "show", "HEAD:calc.py") == FIXED
    assert sorted(p.name for p in (repo / ".venv" / "lib").iterdir()) == ["site.py"]
    assert (repo / ".venv" / "lib" / "site.py").read_text() == "# your environment\n"
    transcript = next((repo / ".openagents" / "history" / "T-1").glob("*.transcript.txt")).read_text()
    assert "read: # your environment" in transcript and transcript.count("refused .venv") == 2
