"""Two fleet workers, two tasks that pass alone and fail together: the second to integrate
is checked on top of the first before it is pushed, and is blocked, never closed.

S-1 empties util.py (nothing uses it yet); S-2 adds double.py, which imports from it. The
project's check imports every module, and each task's own check waits until the other's
has started too, so both ran on the tip as it was before either integrated.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from fleetkit import (
    PY,
    make_remote,
    meet,
    remote_tasks,
    reply,
    start_worker,
    task,
    wait_exit,
    worker_log,
    write_script,
)
from projects import git

from orchestrator.cli import main

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

UTIL = "def twice(x):\n    return 2 * x\n"
DOUBLE = "from util import twice\n\n\ndef double(x):\n    return twice(x)\n"
# Appended to the project's check (fleetkit.CHECK): meet the other task, then import everything.
WHO = '''import importlib
sys.path.insert(0, ".")
me = "S-2" if pathlib.Path("double.py").exists() else None
if "twice" not in pathlib.Path("util.py").read_text():
    me = "S-1" if me is None else None  # both changes: a combined check, no one to meet
'''
IMPORT_ALL = '''for path in sorted(pathlib.Path(".").glob("*.py")):
    if path.stem != "check":
        importlib.import_module(path.stem)
'''


def test_two_tasks_that_pass_alone_but_fail_together_never_both_close(pg_server, tmp_path: Path) -> None:
    url = pg_server.new_database()
    (tmp_path / "meet").mkdir()
    model = write_script(tmp_path / "script.json", [reply("S-1", "util.py", "# nothing here yet\n"),
                                                     reply("S-2", "double.py", DOUBLE)])
    remote = make_remote(tmp_path, "lib", [task("S-1", "Remove twice"), task("S-2", "Add double", n=1)], model,
                         check_extra=WHO + meet(tmp_path / "meet", ("S-1", "S-2")) + IMPORT_ALL, files={"util.py": UTIL})
    assert main(["enqueue", "--queue", url, "--workdir", str(tmp_path / "enqueuer"), remote, "--json"]) == 0
    logs = tmp_path / "logs"
    workers = [start_worker(url, tmp_path / "machine", f"w{n}", logs, "--lease", "10") for n in (1, 2)]

    assert wait_exit(workers) == [0, 0], [worker_log(logs, f"w{n}") for n in (1, 2)]

    board = remote_tasks(remote)
    assert sorted(board[t]["status"] for t in ("S-1", "S-2")) == ["blocked", "closed"]
    loser = next(t for t in ("S-1", "S-2") if board[t]["status"] == "blocked")
    reason = board[loser]["closeReason"]
    assert reason.startswith("its checks passed on the tree it started from, but fail with the tasks that landed "
                             "on main since"), reason
    assert f"kept on branch goldenloop/{loser} of the remote" in reason and board[loser].get("closedAt") is None
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", remote, str(clone))
    assert subprocess.run([PY, "check.py"], cwd=clone, capture_output=True).returncode == 0  # main passes its check
