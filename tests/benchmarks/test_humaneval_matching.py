"""Resampling given reflexion's tokens: the budget is spent breadth-first, as a capped run would."""

from __future__ import annotations

from bench.humaneval.matching import within_total
from bench.humaneval.results import ProblemResult


def result(tokens: list[int], passed_at: int | None) -> ProblemResult:
    return ProblemResult(outcome="passed" if passed_at else "failed", passed_at=passed_at,
                         attempts=len(tokens), attempt_tokens=tokens)


def test_every_problem_gets_its_first_sample_before_any_gets_a_second() -> None:
    hard, easy = result([100, 100], 2), result([150], 1)
    assert within_total([hard, easy], 260) == (1, 250)  # hard's second sample does not fit
    assert within_total([hard, easy], 350) == (2, 350)


def test_a_first_sample_longer_than_the_greedy_reply_still_counts_when_the_total_fits() -> None:
    samples = [result([110], 1), result([95], 1), result([100, 90], 2)]
    assert within_total(samples, 400) == (3, 395)
    assert within_total(samples, 394) == (2, 305)


def test_result_files_of_separate_modes_merge_into_one_report_with_each_repair_mode_against_resampling(
    tmp_path, capsys
) -> None:
    from bench.humaneval.report import main
    from bench.humaneval.results import ModeRecord, ModeSettings, ResultFile

    def file(name: str, label: str, problems: dict[str, ProblemResult]) -> str:
        body = ResultFile(model="m", dataset={}, protocol={}, selection=["HumanEval/0", "HumanEval/5"], modes={
            name: ModeRecord(settings=ModeSettings(label=label, reflexion=name != "resample", max_attempts=4),
                             problems=problems)})
        path = tmp_path / name / "results.json"
        path.parent.mkdir()
        path.write_bytes(body.model_dump_json(by_alias=True).encode())
        return str(path)

    def spent(tokens: list[int], passed_at: int) -> ProblemResult:
        return result(tokens, passed_at).model_copy(update={"input_tokens": sum(tokens)})

    sampled = {"HumanEval/0": spent([100], 1), "HumanEval/5": spent([100, 100], 2)}
    repaired = {"HumanEval/0": spent([100], 1), "HumanEval/5": spent([100, 300], 2)}
    paths = [file("resample", "resampling", sampled), file("reflexion1", "one call", repaired),
             file("adaptive", "adaptive", repaired)]

    assert main(["--merge", *paths]) == 0

    out = capsys.readouterr().out
    assert "| one call | 2/2 | 500 | 250 |" in out and "| adaptive | 2/2 | 500 | 250 |" in out
    assert out.count("| resampling | 2/2 | 300 | 150 |") == 2


def test_a_reply_with_only_its_reflection_counts_as_a_reply_not_applied(git_repo) -> None:
    from projects import WRONG_ADD, do_one_task, make_project

    from bench.humaneval.results import result_from_repo

    reflected = ("What went wrong: add() returned abs(a) + abs(b).\n"
                 "What to do differently: return the plain sum a + b.")
    repair = "calc.py\n<<<<<<< SEARCH\n    return abs(a) + abs(b)\n=======\n    return a + b\n>>>>>>> REPLACE\n"
    replies = [{"match": "Task T-1", "reply": WRONG_ADD}, {"match": "Attempt 1 failed", "reply": reflected},
               {"match": "now write the edit it calls for", "reply": repair}]
    repo = make_project(git_repo, replies, config={"reflexion": {"oneCall": True}})
    assert do_one_task(repo) == 0

    found = result_from_repo(repo, "T-1", 1.0)

    assert found is not None and found.passed_at == 2
    assert (found.replies, found.replies_applied) == (3, 2)  # the reflection alone carried no edit
