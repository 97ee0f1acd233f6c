"""Render a real run's morning report in headless Chromium and save a screenshot.

Copies the demo project (examples/demo) to a temporary folder, adds a second task that
the scripted model can never get right, runs `overnight` on it offline, and opens the
run's `.openagents/runs/<runId>.html` in Chromium (the system package; `chromium` on
PATH, or --chromium PATH) with `--headless --screenshot`:

    .venv/bin/python docs/morning_report_screenshot.py [--out morning-report.png]
    .venv/bin/python docs/morning_report_screenshot.py --page WORK/results.html --out chart.png

`--page` shoots any page instead, such as the HumanEval harness's `results.html` (its
pass-after-k chart). Prints the page's path and the screenshot's. Nothing in this
checkout is modified.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

from run_demo import make_repository  # noqa: E402

HOPELESS = {"id": "DEMO-2", "title": "Translate the slugs",
            "description": "Give slug.py a translate(slug, language) that translates a slug's words.",
            "status": "open", "priority": 2, "type": "feature", "labels": ["demo"], "deps": [],
            "createdAt": "2026-11-01T09:05:00Z", "updatedAt": "2026-11-01T09:05:00Z", "commits": []}
# A reply with no edit in it, every time: the task ends blocked, with its escalation packet.
REFUSAL = "Translating slugs needs a dictionary this repository does not have, so I made no change."


def prepare(workdir: Path) -> Path:
    repo = make_repository(workdir / "blog")
    meta = repo / ".openagents"
    with (meta / "tasks.jsonl").open("a") as tasks:
        tasks.write(json.dumps(HOPELESS) + "\n")
    script = json.loads((meta / "demo-model.json").read_text())
    script["replies"].append({"match": "Task DEMO-2", "reply": REFUSAL, "times": None})
    (meta / "demo-model.json").write_text(json.dumps(script, indent=1))
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "a task the model cannot do"], cwd=repo, check=True)
    return repo


def fresh_report() -> Path:
    """Run overnight on a copy of the demo with a hopeless second task; its report page."""
    repo = prepare(Path(tempfile.mkdtemp(prefix="goldenloop-report-")))
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    from orchestrator.cli import overnight_main

    overnight_main([str(repo), "--max-tasks", "2"])
    (page,) = sorted((repo / ".openagents" / "runs").glob("*.html"))
    return page


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("morning-report.png"))
    parser.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    parser.add_argument("--page", type=Path, help="shoot this HTML file instead of a fresh run's report")
    args = parser.parse_args(argv)
    if not args.chromium:
        print("no chromium on PATH: install the system package (apt-get install chromium) or pass --chromium")
        return 2
    page = args.page.resolve() if args.page else fresh_report()
    out = args.out.resolve()
    subprocess.run([args.chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={out}", "--window-size=1000,1100", page.as_uri()],
                   check=True, capture_output=True, timeout=120)
    print(f"page: {page}\nscreenshot: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
