"""Each task's acceptance tests judge from the moment the task starts.

They live outside the repository (hidden, as a reviewer's checks are) and are run with
the repository's own tests. Before its task starts a test is skipped: it would fail, and
a bug task that names no test is about every test failing before it. After a task ends
blocked its tests are skipped again; after it closes they keep guarding its work.

The task's status is read from the live backlog the test command names (`BOOKSHOP_BOARD`):
goldenloop runs the checks in a clean export of the commit, whose backlog is as committed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


def _status(task_id: str) -> str | None:
    path = Path(os.environ.get("BOOKSHOP_BOARD") or Path.cwd() / ".openagents" / "tasks.jsonl")
    for line in path.read_text().splitlines():
        if line.strip() and json.loads(line).get("id") == task_id:
            return json.loads(line).get("status")
    return None


def judged_from_start(task_id: str) -> pytest.MarkDecorator:
    status = _status(task_id)
    return pytest.mark.skipif(status not in ("in_progress", "closed"), reason=f"{task_id} is {status}")
