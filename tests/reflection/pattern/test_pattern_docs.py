"""docs/PATTERN.md's first example runs as written and prints the journey it promises."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "PATTERN.md"


def test_the_documented_run_works_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    code = re.search(r"## A run.*?```python\n(.*?)```", DOC.read_text(), re.S)
    assert code is not None
    exec(compile(code.group(1), str(DOC), "exec"), {"__name__": "pattern_doc"})
    out = capsys.readouterr().out
    assert "Iteration 1: Score 0.67" in out and "Iteration 2: Score 1.00" in out
    assert "quality_met 2" in out and '"""The sum of a and b."""' in out
