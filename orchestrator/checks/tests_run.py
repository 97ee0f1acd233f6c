"""Whether the tests that judged the tree before the task still run after an attempt.

A test that no longer runs is not a test that passes. An attempt can make a failing test
vanish without touching a test file: a `-k` or `--deselect` in the runner's options
(`pytest.ini`, `pyproject.toml`, `setup.cfg`, `tox.ini`), a narrowed `testpaths`, or code
that ends the runner early with exit code 0. Each leaves fewer tests run than the
preflight counted, more deselected, or no count at all, and the attempt is rejected.
"""

from __future__ import annotations

import re

from orchestrator.checks.verify import Verdict

_DESELECTED = re.compile(r"\b(\d+) deselected\b")


def _ran(verdict: Verdict) -> int | None:
    """Tests run (passed and failed), or None when the runner printed no count."""
    if verdict.tests_passed is None:
        return None
    return verdict.tests_passed + (verdict.tests_failed or 0)


def _deselected(verdict: Verdict) -> int:
    """Tests pytest deselected, summed over the test commands (each one's last count)."""
    counts = (_DESELECTED.findall(step.output) for step in verdict.steps if step.kind == "test")
    return sum(int(found[-1]) for found in counts if found)


def fewer_tests_ran(before: Verdict, after: Verdict) -> str | None:
    """Why a passing `after` does not show the preflight's tests passing; None when it does.

    Compared only where the preflight counted its tests: a runner that prints no count
    gives nothing to compare.
    """
    ran_before = _ran(before)
    if not ran_before:
        return None
    ran_after, deselected = _ran(after), _deselected(after)
    if ran_after is None:
        now = "the test commands printed no count of the tests they ran"
    elif ran_after < ran_before:
        now = f"{ran_after} ran now"
    elif deselected > _deselected(before):
        now = f"{deselected} deselected now, {_deselected(before)} before"
    else:
        return None
    return (f"rejected: {ran_before} test(s) ran before the task and {now}; a test that stops running is not "
            "fixed: fix the code, and leave the tests and the test runner's options as they were")
