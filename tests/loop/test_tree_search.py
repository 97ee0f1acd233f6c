"""retry.strategy "tree": candidates from a saved tree, each scored by the checks, the best
one expanded; the loop's guarantees kept (nothing committed unless the checks pass, the
user's files untouched, the attempts bounded as in the linear loop)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from projects import CALC, REFLECTION, do_one_task, events_of, git, make_project, tasks_on_disk, write_file

from orchestrator.config import ConfigError, load_config

FIXED = CALC.replace("return a - b", "return a + b")
ABS = CALC.replace("return a - b", "return abs(a) + abs(b)")  # 2 of 3 tests pass
ZERO = CALC.replace("return a - b", "return 0")  # 1 of 3
VARIANTS = [CALC.replace("return a - b", body) for body in ("return abs(a + b)", "return abs(a) + b",
                                                           "return a + b if a > 0 else abs(a + b)")]
RETRY_BLOCK = r"## Attempt \d+ failed\n"
OTHER_WAY = "try another way"
REFLECT = {"match": "Failure digest", "reply": REFLECTION, "times": None}
TREE = {"retry": {"strategy": "tree", "preflight": False}}


def _dead_end() -> list[dict]:
    """Shown its code, the model keeps repairing a wrong idea; asked for another way, it is right."""
    return [REFLECT, {"match": OTHER_WAY, "reply": write_file("calc.py", FIXED)},
            *[{"match": RETRY_BLOCK, "reply": write_file("calc.py", v)} for v in VARIANTS],
            {"match": "Task T-1", "reply": write_file("calc.py", ABS), "times": None}]


def _committed_calc(repo: Path) -> str:
    return git(repo, "show", "HEAD:calc.py")


def test_a_dead_end_is_left_for_another_candidate_from_the_start(git_repo: Path) -> None:
    repo = make_project(git_repo, _dead_end(), config=TREE)
    assert do_one_task(repo) == 0
    (branch,) = events_of(repo, "tree_search")
    assert (branch["attempt"], branch["next"], branch["score"]) == (1, "sibling", 0.6667)
    assert branch.get("startsFrom") is None  # the subtask's start
    assert len(events_of(repo, "attempt_started")) == 2
    assert (repo / "calc.py").read_text() == FIXED == _committed_calc(repo)
    assert tasks_on_disk(repo)["T-1"]["status"] == "closed"


def test_the_linear_loop_stays_in_the_dead_end(git_repo: Path) -> None:
    repo = make_project(git_repo, _dead_end(), config={"retry": {"preflight": False}})
    assert do_one_task(repo) == 1
    assert tasks_on_disk(repo)["T-1"]["status"] == "blocked" and _committed_calc(repo) == CALC
    assert not events_of(repo, "tree_search")


def test_the_best_candidate_is_expanded_from_its_own_tree(git_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    replies = [REFLECT, {"match": OTHER_WAY, "reply": write_file("calc.py", ZERO)},
               {"match": RETRY_BLOCK, "reply": "calc.py\n<<<<<<< SEARCH\n    return abs(a) + abs(b)\n=======\n"
                                                "    return a + b\n>>>>>>> REPLACE\n"},
               {"match": "Task T-1", "reply": write_file("calc.py", ABS)}]
    repo = make_project(git_repo, replies, config=TREE)
    assert do_one_task(repo) == 0
    first, second = events_of(repo, "tree_search")
    assert (first["next"], first.get("startsFrom")) == ("sibling", None)
    # Attempt 2 (1 of 3) was worse than attempt 1 (2 of 3): attempt 3 starts from attempt 1's tree.
    assert (second["attempt"], second["score"], second["next"], second["startsFrom"]) == (2, 0.3333, "expand", 1)
    assert (repo / "calc.py").read_text() == FIXED
    out = capsys.readouterr().out
    assert "tree search: another candidate from the subtask's start" in out
    assert "tree search: expanding the best candidate, attempt 1's tree" in out


def test_nothing_is_committed_and_the_users_files_stay_when_every_candidate_fails(git_repo: Path) -> None:
    replies = [REFLECT, *[{"match": "Task T-1", "reply": write_file("calc.py", v)} for v in [ABS, ZERO, *VARIANTS]]]
    repo = make_project(git_repo, replies, config=TREE)
    (repo / "mine.txt").write_text("the user's own notes\n")
    assert do_one_task(repo, "--allow-dirty") == 1
    assert len(events_of(repo, "attempt_started")) == 4  # reflexion.maxRetries bounds the search too
    assert [e["next"] for e in events_of(repo, "tree_search")] == ["sibling", "expand", "sibling"]
    assert _committed_calc(repo) == CALC == (repo / "calc.py").read_text()
    assert (repo / "mine.txt").read_text() == "the user's own notes\n"
    (escalated,) = events_of(repo, "escalated")
    assert escalated["convergence"] == "max_retries"


def test_a_strategy_that_does_not_exist_is_one_sentence(tmp_path: Path) -> None:
    (tmp_path / ".openagents").mkdir()
    (tmp_path / ".openagents" / "project.json").write_text(json.dumps({"retry": {"strategy": "beam"}}))
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path, {})
    assert str(caught.value) == "project.json: retry.strategy must be one of 'linear', 'tree' or 'adaptive' (got \"beam\")"


def test_the_console_does_not_call_a_zero_score_best_nor_print_stops_the_search_ignores(
    git_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = [CALC.replace("return a - b", f"return 'wrong {n}'").replace("a * b", "0") for n in range(4)]
    replies = [REFLECT, *[{"match": "Task T-1", "reply": write_file("calc.py", v)} for v in wrong]]
    repo = make_project(git_repo, replies, config=TREE)
    assert do_one_task(repo) == 1
    assert [e["score"] for e in events_of(repo, "tree_search")] == [0.0, 0.0, 0.0]
    assert len(events_of(repo, "attempt_started")) == 4
    out = capsys.readouterr().out
    assert "tree search: no candidate passed any test; expanding the latest, attempt 2's tree" in out
    assert "best candidate" not in out
    assert "unlikely" not in out and "progress:" not in out
