"""The README's first command, as a new user meets it: the demo runs clean, offline.

A process of its own, as `python3 dev.py demo` starts it: in the test process, litellm may
already be bound to another test's event loop, which no user's demo ever is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

DEMO = Path(__file__).resolve().parents[1] / "examples" / "run_demo.py"


def test_the_demo_closes_its_task_and_prints_no_error_or_warning(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, str(DEMO)], capture_output=True, text=True, env=env, timeout=600,
                          check=False)

    text = done.stdout + done.stderr
    assert done.returncode == 0, text
    assert "closed DEMO-1 with 1 commit(s)" in text
    assert "reflection (scripted model) [edge_case]" in text  # the demo's model is no real one
    assert "success reflection (written by the scripted model) kept for other tasks" in text
    assert "attempt 1, up to 3 retries" in text and "attempt 2, retry 1 of 3" in text
    assert '"sessionId"' not in text and "scripted//" not in text  # no raw record dumped
    assert "goldenloop show DEMO-1 --dir " in text and "goldenloop report --open --dir " in text
    for word in ("error", "WARNING", "Traceback"):
        assert word not in text.replace("errorSignature", ""), f"the demo printed {word!r}"
