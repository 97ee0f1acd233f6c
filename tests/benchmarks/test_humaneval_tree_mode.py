"""The HumanEval harness's opt-in `tree` mode: reflexion retries with `retry.strategy: "tree"`,
offline with the scripted model; the mechanics only, never a pass rate."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is not an installed package
    sys.path.insert(0, str(ROOT))

from bench.humaneval.modes import MODES, TREE, parse_modes  # noqa: E402
from bench.humaneval.problems import load_problems, select  # noqa: E402
from bench.humaneval.run import run_benchmark  # noqa: E402
from bench.humaneval.smoke import smoke_options  # noqa: E402

PROBLEMS = select(load_problems(), limit=5)


def test_tree_is_opt_in_and_named_by_modes() -> None:
    assert "tree" not in MODES and parse_modes("reflexion,tree")[-1] is TREE
    assert TREE.retry["strategy"] == "tree" and MODES["reflexion"].retry.get("strategy") is None


@pytest.mark.slow
def test_the_tree_mode_runs_every_problem_with_the_tree_strategy(tmp_path: Path) -> None:
    options = smoke_options(tmp_path / "work", PROBLEMS, parallel=2, modes=[TREE])
    results = anyio.run(run_benchmark, options)
    problems = results.modes["tree"].problems
    assert sorted(problems) == [p.task_id for p in PROBLEMS]
    assert all(r.attempts <= TREE.max_attempts for r in problems.values())
    config = json.loads((tmp_path / "work" / "tree" / "HumanEval-4" / ".openagents" / "project.json").read_text())
    assert config["retry"]["strategy"] == "tree" and config["reflexion"]["enabled"] is True
