"""Some of pytest's tests, by id: the failing ones first, then the rest without them.

A judged run may run the tests that decide its verdict soonest before the others
(judging/judge.py, `Judge._first`). pytest is told which through a plugin of goldenloop's
own, written outside the judge's tree and loaded with `-p` through `PYTEST_ADDOPTS`, as
the JUnit report is asked for: whatever the command line, a Makefile or a script that
runs pytest, it reads that variable. The plugin keeps the collected tests whose id (or
whose file, for a file that could not be collected) is listed (`only`), or every test but
those (`except`), and reports the others as deselected, as `-k` does. Only the order and
the number of sessions change: each test runs once, on the same tree, with the same
command.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

Mode = Literal["only", "except"]
PLUGIN = "goldenloop_selection"
LIST_VARIABLE = "GOLDENLOOP_SELECTION"

_SOURCE = '''"""goldenloop's selection of tests by id (orchestrator/judging/selection.py)."""
import os


def pytest_collection_modifyitems(config, items):
    path = os.environ.get("GOLDENLOOP_SELECTION")
    if not path:
        return
    with open(path, encoding="utf-8") as listed:
        mode, *ids = listed.read().split("\\n")
    ids = set(ids)
    keep, drop = [], []
    for item in items:
        named = item.nodeid in ids or item.nodeid.split("::", 1)[0] in ids
        (keep if named == (mode == "only") else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
'''


def selecting(env: Mapping[str, str], home: Path, mode: Mode, ids: Iterable[str]) -> dict[str, str]:
    """`env` with pytest told to run `only` the tests `ids` name, or all `except` them."""
    folder = home / "selection"
    folder.mkdir(exist_ok=True)
    (folder / f"{PLUGIN}.py").write_text(_SOURCE)
    listed = home / "selection.txt"
    listed.write_text("\n".join([mode, *sorted(ids)]), encoding="utf-8")
    given = env.get("PYTEST_ADDOPTS", "").strip()
    path = env.get("PYTHONPATH", "")
    return {**env, "PYTEST_ADDOPTS": f"{given} -p {PLUGIN}".strip(), LIST_VARIABLE: str(listed),
            "PYTHONPATH": os.pathsep.join([*([path] if path else []), str(folder)])}
