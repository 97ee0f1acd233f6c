"""Records and writer processes shared by the memory tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from reflection.outcome import OutcomeReflection
from reflection.schema import FailureCategory, Reflection

# A writer in its own interpreter: append n reflections (or forever) to the store named
# by url ("jsonl": the files in memory_dir) once the `go` file exists, printing each id
# once its append has returned; an append the server did not answer in time is made again.
WRITER = """
import os, sys, time
from pathlib import Path
from reflection.backends import open_store
from reflection.schema import Reflection

url, memory_dir, project, tag, n, go = sys.argv[1:7]
store = open_store(None if url == "jsonl" else url, Path(memory_dir), project=project)
while go != "-" and not os.path.exists(go):
    time.sleep(0.002)
i = 0
while n == "forever" or i < int(n):
    i += 1
    record = Reflection(session_id="s", task_id="t", subtask_id=tag, attempt_number=i, category="root_cause",
                        analysis="x" * 300, suggestion="try again", confidence=0.5)
    deadline = time.monotonic() + 600
    while True:  # a busy machine may take longer to recover from a crash than a caller waits
        try:
            store.append(record)  # idempotent by id: appending again never makes a second record
            break
        except Exception as exc:
            if type(exc).__name__ != "PostgresUnavailable" or time.monotonic() > deadline:
                raise
    print(record.id, flush=True)
"""


def start_writer(url: str | None, memory_dir: Path, project: str, tag: str, n: str,
                 go: Path | None = None) -> subprocess.Popen[str]:
    args = [sys.executable, "-c", WRITER, url or "jsonl", str(memory_dir), project, tag, n, str(go) if go else "-"]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def attempt(subtask: str = "sub-1", number: int = 1, **extra: Any) -> Reflection:
    return Reflection(session_id="sess-1", task_id="task-1", subtask_id=subtask, attempt_number=number,
                      category=FailureCategory.EDGE_CASE, analysis="Empty input crashes the parser.",
                      suggestion="Return an empty list for empty input.", action_items=["guard empty input"],
                      confidence=0.6, **extra)


def outcome(task_id: str = "T-1", advice: str = "Keep the timezone when parsing dates.", *, ended: str = "failed",
            **extra: Any) -> OutcomeReflection:
    return OutcomeReflection(outcome=ended, session_id="sess-1", task_id=task_id, agent="coder",
                             title=f"task {task_id}", what_to_do_differently=advice, **extra)
