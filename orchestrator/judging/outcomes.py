"""Each test's outcome, by the id the runner gives it, as the runner itself reports it.

pytest is asked for a JUnit XML report through `PYTEST_ADDOPTS` (whatever the command
line, a Makefile or a script that runs pytest, it reads that variable), written outside
the tree, in the xunit1 form that names each test's file: its ids are rebuilt exactly as
pytest prints them (`tests/test_x.py::TestY::test_z[1]`). It is asked to go on after a
file it cannot collect too (that file's id is then the file's path), so that one such
file does not hide every other test. A command whose report is
missing or is not the whole run (pytest run twice by one command writes the file twice)
reports nothing, and the judge falls back on its exit code and the failing ids in its
output. So does a report whose failures are not the ones pytest printed on its last line:
the code under test runs in pytest's process and could rewrite the file at exit. Other
runners report ids the same way when told to (`--junitxml`-like options of their own);
reading their report is a matter for `read_junit` alone.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from xml.etree import ElementTree

from orchestrator.checks.verify import Verdict

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
PYTEST_USAGE_EXIT = 4
# pytest's last line, once per session: `=== 2 failed, 9 passed in 0.31s ===`, or bare with -q
_SESSION_END = re.compile(r"^=*\s*(?:(?:\d+ \w+,? )+|no tests ran )in [\d.]+s\b", re.M)


def asking_for_report(env: Mapping[str, str], report: Path) -> dict[str, str]:
    """`env` with pytest asked to write its JUnit report to `report`."""
    # A test file that cannot be collected (tests written before the code they import) must
    # not keep every other test from running and being counted.
    asked = f"--junitxml={shlex.quote(str(report))} -o junit_family=xunit1 --continue-on-collection-errors"
    given = env.get("PYTEST_ADDOPTS", "").strip()
    return {**env, "PYTEST_ADDOPTS": f"{given} {asked}".strip()}


def refused_report(verdict: Verdict) -> bool:
    """pytest refused the options that ask for the report (its junitxml plugin switched off,
    a version without them): the command is then run as the user runs it, reporting nothing."""
    step = verdict.steps[-1] if verdict.steps else None
    return (step is not None and step.exit_code == PYTEST_USAGE_EXIT
            and bool(re.search(r"unrecognized arguments:.*(?:--junitxml|--continue-on-collection-errors)|"
                               r"unknown .*junit_family", step.output)))


def read_report(report: Path, output: str) -> dict[str, str] | None:
    """The outcome of every test of one command's run, by id; None when it reported none
    or not all (no report, an unreadable one, or more sessions than one report)."""
    ends = _SESSION_END.findall(output)
    if len(ends) > 1:
        return None
    try:
        data = report.read_bytes()
    except OSError:
        return None
    outcomes = read_junit(data)
    if outcomes is not None and ends and _failures(ends[-1]) != _failures_in(data):
        return None  # the report says other than what pytest printed: something rewrote it
    return outcomes


def _failures(line: str) -> int:
    """Failed tests and errors on pytest's last line."""
    return sum(int(n) for n, kind in re.findall(r"(\d+) (failed|errors?)\b", line))


def _failures_in(data: bytes) -> int | None:
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError:
        return None
    return sum(1 for case in root.iter("testcase") for child in case if child.tag in ("failure", "error"))


def read_junit(data: bytes) -> dict[str, str] | None:
    """Outcomes from a JUnit XML report (pytest's xunit1 names each test's file)."""
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError:
        return None
    outcomes: dict[str, str] = {}
    for case in root.iter("testcase"):
        test_id = _test_id(case)
        outcome = _outcome(case)
        if outcomes.get(test_id) != FAILED:  # a teardown error after a pass is a failure
            outcomes[test_id] = outcome
    return outcomes


def _outcome(case: ElementTree.Element) -> str:
    tags = {child.tag for child in case}
    if tags & {"failure", "error"}:
        return FAILED
    return SKIPPED if "skipped" in tags else PASSED


def _test_id(case: ElementTree.Element) -> str:
    """The id pytest prints for a test case of its report."""
    name, classname, file = case.get("name", ""), case.get("classname", ""), case.get("file")
    if not classname:  # a collection error: its name is the module's dotted path
        return file or name.replace(".", "/") + ".py"
    if file:
        module = re.sub(r"\.py$", "", file).replace(os.sep, ".").replace("/", ".")
        if classname == module:
            return f"{file}::{name}"
        if classname.startswith(module + "."):
            return f"{file}::{classname[len(module) + 1:].replace('.', '::')}::{name}"
    return f"{classname.replace('.', '/')}.py::{name}"  # no file named: the dotted path read back
