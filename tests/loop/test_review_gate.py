"""The review gate end to end (seeds 002 and 003): a passing attempt is scored on weighted
criteria; below the threshold its review's improvements feed one revision, and the better
passing version is committed. Every attempt's journey stays on disk for `goldenloop history`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from projects import PY, REFLECTION, WRONG_ADD, do_one_task, events_of, git, make_project, model_calls

from orchestrator.cli import main

# Passes the tests, but a bare except swallows every error: what a reviewer flags.
SWALLOWING_ADD = """calc.py
<<<<<<< SEARCH
    return a - b
=======
    try:
        return a + b
    except:
        pass
>>>>>>> REPLACE
"""
CLEAN_ADD = """calc.py
<<<<<<< SEARCH
    try:
        return a + b
    except:
        pass
=======
    return a + b
>>>>>>> REPLACE
"""
BROKEN_REVISION = """calc.py
<<<<<<< SEARCH
    try:
        return a + b
    except:
        pass
=======
    return a - b
>>>>>>> REPLACE
"""
FIX_ABS = "calc.py\n<<<<<<< SEARCH\n    return abs(a) + abs(b)\n=======\n    return a + b\n>>>>>>> REPLACE\n"
JUDGED = "## The work to judge"


def verdict(quality: float, handling: float, suggestion: str = "") -> str:
    scores = {"task_completion": 1.0, "code_quality": quality, "error_handling": handling, "test_coverage": 0.9}
    return json.dumps({
        "scores": [{"name": k, "score": v, "reasoning": f"{k.replace('_', ' ')} judged {v}"} for k, v in scores.items()],
        "issues": ["a bare except in add swallows every error"] if handling < 0.5 else [],
        "suggestions": [suggestion] if suggestion else [],
        "strengths": ["the tests pass"],
        "confidence": 0.8,
    })


POOR = verdict(0.4, 0.2, "Remove the bare except around the sum in add")
GOOD = verdict(0.95, 0.9)
REVIEWED = {"reflexion": {"useLLM": False}, "retry": {"preflight": False}, "review": {"enabled": True}}


def task_commit(repo: Path) -> str:
    """The task's commit (bookkeeping commits may follow it)."""
    return next(line.split()[0] for line in git(repo, "log", "--format=%H %s").splitlines() if line.endswith(" T-1: Fix add"))


def committed_calc(repo: Path) -> str:
    return git(repo, "show", f"{task_commit(repo)}:calc.py")


def test_a_poor_passing_attempt_is_revised_and_the_better_one_committed(git_repo: Path, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    replies = [
        {"match": "Task T-1:", "reply": SWALLOWING_ADD},
        {"match": JUDGED, "reply": POOR},
        {"match": r"Task T-1:.*its review asks for more.*Remove the bare except", "reply": CLEAN_ADD},
        {"match": JUDGED, "reply": GOOD},
    ]
    repo = make_project(git_repo, replies, config=REVIEWED)

    assert do_one_task(repo) == 0

    assert "except" not in committed_calc(repo) and "return a + b" in committed_calc(repo)
    first, second = events_of(repo, "reviewed")
    assert first["score"] < 0.8 and not first["satisfactory"] and first["source"] == "llm"
    assert {c["name"]: c["score"] for c in first["criteria"]}["error_handling"] == 0.2
    assert second["score"] >= 0.8 and second["satisfactory"]
    (asked,) = events_of(repo, "revision_asked")
    assert asked["improvements"] == ["Remove the bare except around the sum in add"]
    assert model_calls(repo, "review") == 2

    capsys.readouterr()
    assert main(["history", "T-1", "--dir", str(repo)]) == 0
    journey = capsys.readouterr().out
    assert f"Iteration 1: Score {first['score']:.2f}  reviewed" in journey
    assert f"Iteration 2: Score {second['score']:.2f}  passed" in journey
    assert "Asked to improve: Remove the bare except around the sum in add" in journey
    assert "error_handling: 0.20 (llm)" in journey and "Best version: attempt 2" in journey
    assert journey.count(" in (cache not reported) / ") == 2  # the scripted model says nothing of a cache

    assert main(["history", "T-1", "--dir", str(repo), "--patch", "1"]) == 0
    patch = capsys.readouterr().out
    assert "+    except:" in patch  # the passing but poor version can still be put back
    (tmp_path / "first.patch").write_text(patch)
    git(repo, "checkout", "-q", f"{task_commit(repo)}~1")
    git(repo, "apply", str(tmp_path / "first.patch"))
    assert "except:" in (repo / "calc.py").read_text()


def test_a_good_passing_attempt_is_committed_at_once(git_repo: Path) -> None:
    repo = make_project(git_repo, [{"match": "Task T-1:", "reply": SWALLOWING_ADD}, {"match": JUDGED, "reply": GOOD}],
                        config=REVIEWED)
    assert do_one_task(repo) == 0
    assert len(events_of(repo, "attempt_started")) == 1
    assert events_of(repo, "revision_asked") == []
    (review,) = events_of(repo, "reviewed")
    assert review["satisfactory"]


def test_a_worse_revision_is_dropped_and_the_passing_version_kept(git_repo: Path) -> None:
    replies = [
        {"match": "Task T-1:", "reply": SWALLOWING_ADD},
        {"match": JUDGED, "reply": POOR},
        {"match": "Task T-1:", "reply": BROKEN_REVISION},
    ]
    repo = make_project(git_repo, replies, config=REVIEWED)

    assert do_one_task(repo) == 0

    assert "except:" in committed_calc(repo)  # the revision broke the tests: attempt 1 stands
    (kept,) = events_of(repo, "review_kept_best")
    assert kept["kept"] == 1 and "failed its checks" in kept["reason"]
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""


def test_without_a_model_a_project_command_and_the_heuristic_review(git_repo: Path) -> None:
    """No judge model: a criterion judged by a command the project names (here a grep for
    bare excepts standing for a linter), the others by the diff heuristic."""
    lint = f"{PY} -c \"import sys; sys.exit('except:' in open('calc.py').read())\""
    review = {"enabled": True, "useLLM": False,
              "criteria": [{"name": "task_completion", "weight": 0.5}, {"name": "lint", "weight": 0.5, "command": lint}]}
    replies = [{"match": "Task T-1:", "reply": SWALLOWING_ADD}, {"match": "Task T-1:", "reply": CLEAN_ADD}]
    repo = make_project(git_repo, replies, config={**REVIEWED, "review": review})

    assert do_one_task(repo) == 0

    first, second = events_of(repo, "reviewed")
    by_name = {c["name"]: c for c in first["criteria"]}
    assert by_name["lint"]["score"] == 0.0 and by_name["lint"]["evaluator"] == "command"
    assert by_name["task_completion"]["evaluator"] == "heuristic"
    assert first["score"] == pytest.approx(0.5)
    assert second["score"] == pytest.approx(1.0)
    assert "except" not in committed_calc(repo)
    assert model_calls(repo, "review") == 0


def test_a_broken_review_prompt_file_is_a_config_error(git_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_project(git_repo, [], config={**REVIEWED, "review": {"enabled": True, "promptFile": "review.md"}})
    (repo / "review.md").write_text("Judge {work} against {criteria}")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a review prompt")
    assert do_one_task(repo) == 2
    err = capsys.readouterr().err
    assert "review.promptFile" in err and "{work}" in err


def test_every_attempt_is_kept_with_its_score_and_patch_without_a_review(git_repo: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    replies = [{"match": "Task T-1:", "reply": WRONG_ADD}, {"match": "Task T-1:", "reply": FIX_ABS}]
    repo = make_project(git_repo, replies, config={"reflexion": {"useLLM": False}, "retry": {"preflight": False}},
                        pricing={"inputCostPerToken": 1e-6, "outputCostPerToken": 2e-6})
    assert do_one_task(repo) == 0

    capsys.readouterr()
    assert main(["history", "T-1", "--dir", str(repo), "--json"]) == 0
    first, second = json.loads(capsys.readouterr().out)
    assert first["outcome"] == "failed"
    assert first["evaluation"]["overallScore"] == pytest.approx(2 / 3, abs=1e-3)  # add_negative still fails
    assert first["tokenUsage"]["costUsd"] > 0 and first["tokenUsage"]["inputTokens"] > 0
    assert second["outcome"] == "passed" and second["commit"]
    assert second["improvementsApplied"]  # the reflection's advice the retry was given
    assert "abs" in Path(first["patchPath"]).read_text()


def test_a_project_reflection_prompt_file_is_the_question_asked(git_repo: Path) -> None:
    replies = [{"match": "Task T-1:", "reply": WRONG_ADD},
               {"match": "Our house question about Fix add", "reply": REFLECTION},
               {"match": "Task T-1:", "reply": FIX_ABS}]
    repo = make_project(git_repo, replies, files={"reflect.md": "Our house question about {subtask}:\n{failure}"},
                        config={"reflexion": {"promptFile": "reflect.md"}, "retry": {"preflight": False}})
    assert do_one_task(repo) == 0
    (reflection,) = events_of(repo, "reflection")
    assert reflection["source"] == "llm"


def test_a_reflection_prompt_file_without_the_failure_is_refused(git_repo: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_project(git_repo, [], files={"reflect.md": "Why did {subtask} fail?"},
                        config={"reflexion": {"promptFile": "reflect.md"}})
    assert do_one_task(repo) == 2
    assert "must contain {failure}" in capsys.readouterr().err


def test_a_review_command_that_cannot_run_is_left_out_and_a_low_review_is_said_when_committed(
        git_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    review = {"enabled": True, "useLLM": False, "revisions": 0,
              "criteria": [{"name": "lint", "weight": 0.5, "command": "no-such-linter-xyz --check ."},
                           {"name": "test_coverage", "weight": 0.5}]}
    repo = make_project(git_repo, [{"match": "Task T-1:", "reply": SWALLOWING_ADD}],
                        config={**REVIEWED, "review": review})

    assert do_one_task(repo) == 0

    (reviewed,) = events_of(repo, "reviewed")
    assert [c["name"] for c in reviewed["criteria"]] == ["test_coverage"]  # lint could not score anything
    assert "no-such-linter-xyz" in reviewed["problems"][0] and "cannot run here" in reviewed["problems"][0]
    assert events_of(repo, "revision_asked") == []  # a setup problem is not the attempt's to fix
    (low,) = events_of(repo, "review_accepted_low")
    assert low["why"] == "no revision left"
    out = capsys.readouterr().out
    assert "not scored: criterion lint" in out and "committing although the review" in out


def test_history_says_which_subtask_is_unknown_and_refuses_json_with_a_patch(
        git_repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = make_project(git_repo, [{"match": "Task T-1:", "reply": SWALLOWING_ADD}, {"match": JUDGED, "reply": GOOD}],
                        config=REVIEWED)
    assert do_one_task(repo) == 0
    capsys.readouterr()
    assert main(["history", "T-1", "--dir", str(repo), "--subtask", "T-1.9"]) == 1
    assert "task T-1 has no subtask T-1.9 (its subtasks: T-1.1)" in capsys.readouterr().err
    assert main(["history", "T-1", "--dir", str(repo), "--patch", "1", "--json"]) == 2
    assert main(["history", "T-1", "--dir", str(repo), "--patch", "7"]) == 1
    assert "--subtask" not in capsys.readouterr().err  # one subtask: nothing to choose
    assert main(["history", "T-1", "--dir", str(repo)]) == 0
    base = git(repo, "rev-parse", f"{task_commit(repo)}~1").strip()[:12]
    assert f"git checkout {base} && goldenloop history T-1" in capsys.readouterr().out
