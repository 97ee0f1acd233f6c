"""The README's first command, as a new user meets it: the demo runs clean, offline."""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[1] / "examples" / "run_demo.py"


def test_the_demo_closes_its_task_and_prints_no_error_or_warning(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("PATH", os.environ.get("PATH", ""))  # the demo puts this python first on it
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    spec = importlib.util.spec_from_file_location("run_demo", DEMO)
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)

    assert demo.main([]) == 0

    printed = capsys.readouterr()
    text = printed.out + printed.err
    assert "closed DEMO-1 with 1 commit(s)" in text
    assert "success reflection (written by the model) kept for other tasks" in text
    for word in ("error", "WARNING", "Traceback"):
        assert word not in text.replace("errorSignature", ""), f"the demo printed {word!r}"


