"""Some of pytest's tests by id, or all of them with a look back at those that broke.

A judged run may learn its verdict from a few tests before the others run (judging/judge.py,
`Judge._old`): those run first in a pytest session of their own (`only`), in the judge's
tree, which is written again from git's objects before the next run, so nothing the few
tests wrote or changed there is seen by the whole suite's run after them. pytest is told
which through a plugin of goldenloop's own, written outside the judge's tree and loaded
with `-p` through `PYTEST_ADDOPTS`, as the JUnit report is asked for: whatever the command
line, a Makefile or a script that runs pytest, it reads that variable. Two modes:

- `only`: only the listed tests (by id, or by file for a file that could not be
  collected); the others are reported deselected, as `-k` does.
- `all`: the whole suite, in its own order, exactly as the command runs it without
  goldenloop.

With either, `again`: a listed test that failed in the session runs once more, alone, in
a fork, when the session ends (when no other test failed, and at most 10 did); how it did
is written beside the list, never reported as the session's, and the session's run is
over by then. A flaky check learns from it that a test fails again alone without a
session of its own. Where `os.fork` is missing there is no such rerun.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Mode = Literal["only", "all"]
PLUGIN = "goldenloop_selection"
LIST_VARIABLE = "GOLDENLOOP_SELECTION"

_SOURCE = '''"""goldenloop's selection of tests by id (orchestrator/judging/selection.py)."""
import json
import os

import pytest
from _pytest.runner import runtestprotocol

FAILED = set()
AGAIN_AT_MOST = 10


def _listed():
    path = os.environ.get("GOLDENLOOP_SELECTION")
    if not path:
        return None
    with open(path, encoding="utf-8") as listed:
        return json.load(listed)


def _named(item, ids):
    return item.nodeid in ids or item.nodeid.split("::", 1)[0] in ids


def pytest_collection_modifyitems(config, items):
    listed = _listed()
    if listed is None or listed["mode"] != "only":
        return
    ids = set(listed["ids"])
    keep, drop = [i for i in items if _named(i, ids)], [i for i in items if not _named(i, ids)]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _probe(session, items):
    """Run `items` alone in a fork: their reports, serialized; None when the fork failed."""
    config = session.config
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        code = 1
        try:
            runs = [[config.hook.pytest_report_to_serializable(config=config, report=report)
                     for report in runtestprotocol(item, log=False, nextitem=None)] for item in items]
            with os.fdopen(write, "w", encoding="utf-8") as pipe:
                json.dump(runs, pipe, default=str)
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, encoding="utf-8") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    if status != 0:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def pytest_runtest_logreport(report):
    if report.failed:
        FAILED.add(report.nodeid)


try:  # a second implementation of the hook needs another name (pluggy 1.2 on)
    _AFTER_THE_LOOP = pytest.hookimpl(specname="pytest_runtestloop", hookwrapper=True)
except TypeError:
    _AFTER_THE_LOOP = None


def _then_again(session):
    yield
    listed = _listed()
    if listed is None or not listed["again"] or not hasattr(os, "fork"):
        return
    again = set(listed["again"])
    items = [item for item in session.items if item.nodeid in FAILED and item.nodeid in again]
    if len(items) > AGAIN_AT_MOST or FAILED - again:  # not chance anyway, or too many to be
        return
    runs = _probe(session, items) if items else None
    if runs is None:
        return
    seen = {item.nodeid: [data.get("outcome") for data in reports] for item, reports in zip(items, runs)}
    outcomes = {test: "failed" if "failed" in said else "skipped" if "skipped" in said else "passed"
                for test, said in seen.items()}
    with open(listed["again_out"], "w", encoding="utf-8") as out:
        json.dump(outcomes, out)


if _AFTER_THE_LOOP is not None:
    pytest_runtestloop_then_again = _AFTER_THE_LOOP(_then_again)  # pytest reads only names that start so
'''


@dataclass(frozen=True)
class Selection:
    """`only` pytest's tests by id (or file), or `all` of them; either way, those of
    `again` that fail run once more alone at the session's end."""

    mode: Mode
    ids: frozenset[str] = field(default_factory=frozenset)
    again: frozenset[str] = field(default_factory=frozenset)  # failed: run again alone at the session's end


def selecting(env: Mapping[str, str], home: Path, selection: Selection) -> dict[str, str]:
    """`env` with pytest told of `selection` through goldenloop's plugin."""
    folder = home / "selection"
    folder.mkdir(exist_ok=True)
    (folder / f"{PLUGIN}.py").write_text(_SOURCE)
    listed = home / "selection.json"
    again_at(home).unlink(missing_ok=True)
    listed.write_text(json.dumps({"mode": selection.mode, "ids": sorted(selection.ids),
                                  "again": sorted(selection.again), "again_out": str(again_at(home))}),
                      encoding="utf-8")
    given = env.get("PYTEST_ADDOPTS", "").strip()
    path = env.get("PYTHONPATH", "")
    return {**env, "PYTEST_ADDOPTS": f"{given} -p {PLUGIN}".strip(), LIST_VARIABLE: str(listed),
            "PYTHONPATH": os.pathsep.join([*([path] if path else []), str(folder)])}


def again_at(home: Path) -> Path:
    """Where the session writes how the `again` tests it ran once more alone did."""
    return home / "again.json"


def read_again(home: Path) -> dict[str, str]:
    """The `again` tests' reruns in the session just ended: test id -> passed | failed | skipped."""
    try:
        found = json.loads(again_at(home).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}
