"""The HumanEval harness keeps one retry-choice record per mode, as one project would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is not an installed package
    sys.path.insert(0, str(ROOT))

from bench.humaneval.build import build_repo, project_config  # noqa: E402
from bench.humaneval.modes import ADAPTIVE  # noqa: E402
from bench.humaneval.problems import load_problems, select  # noqa: E402
from bench.humaneval.shared_record import SharedRecord, memory_name  # noqa: E402
from orchestrator.layout import Layout  # noqa: E402
from orchestrator.loop.retry_choice import RetryChoices  # noqa: E402

PROBLEMS = select(load_problems(), limit=2)


def built(tmp_path: Path, index: int, shared: SharedRecord) -> tuple[Path, str]:
    config = project_config(ADAPTIVE, "scripted/model", verify_timeout_s=60, model_timeout_s=60)
    seeded = shared.seed()
    repo = build_repo(PROBLEMS[index], tmp_path / f"p{index}", config, tmp_path / "checks", {memory_name(): seeded})
    return repo, seeded


def test_each_problem_starts_from_what_the_ones_before_it_counted(tmp_path: Path) -> None:
    shared = SharedRecord(tmp_path / "adaptive" / "retry-choices.json")
    first, seeded = built(tmp_path, 0, shared)
    assert subprocess.run(["git", "status", "--porcelain"], cwd=first, capture_output=True, text=True).stdout == ""
    for _ in range(3):  # what the loop counts when three repairs after a crash fail
        RetryChoices(Layout(first).retry_choices).record("crash", "repair", passed=False)
    shared.add_back(first, seeded)

    second, seeded = built(tmp_path, 1, shared)
    record = RetryChoices(Layout(second).retry_choices)
    # the second problem's run sees the first one's failures, so it tries a fresh start
    assert record.choose("crash")[0] == "resample"
    record.record("crash", "resample", passed=True)
    shared.add_back(second, seeded)

    assert shared.counts() == {"crash": {"repair": {"tried": 3, "passed": 0}, "resample": {"tried": 1, "passed": 1}}}
