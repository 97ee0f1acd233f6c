"""The default memory (JSONL files) never loads the PostgreSQL driver: a project that does
not name a database needs neither psycopg installed nor its import time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHECK = """
import sys
from pathlib import Path
from orchestrator.cli import main

project = Path(sys.argv[1])
for args in (["list"], ["search", "timezone"], ["rules"], ["prune"], ["archive"]):
    assert main(["memory", *args, "--dir", str(project)]) == 0, args
try:
    main(["--help"])
except SystemExit:
    pass
print("psycopg loaded" if any(name.split(".")[0] == "psycopg" for name in sys.modules) else "no psycopg")
"""


def test_memory_commands_on_jsonl_files_never_import_psycopg(tmp_path: Path) -> None:
    (tmp_path / ".openagents" / "memory").mkdir(parents=True)
    done = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "no psycopg"
