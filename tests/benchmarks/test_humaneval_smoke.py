"""The HumanEval harness, offline: the scripted model on 5 problems through `overnight`.

Checks the harness's mechanics (repositories built, four modes run, the per-attempt
table written, a problem solved at the second attempt only with reflexion, resume),
never a pass rate: the script decides every outcome.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `bench` is not an installed package
    sys.path.insert(0, str(ROOT))

from bench.humaneval import report  # noqa: E402
from bench.humaneval.build import project_config, solution_stub  # noqa: E402
from bench.humaneval.modes import CONTROL, MODES  # noqa: E402
from bench.humaneval.options import RunOptions  # noqa: E402
from bench.humaneval.problems import load_problems, select  # noqa: E402
from bench.humaneval.results import ProblemResult, ResultFile, summarize  # noqa: E402
from bench.humaneval.run import (  # noqa: E402
    HarnessError,
    open_results,
    options_from,
    parse_args,
    protocol,
    run_benchmark,
)
from bench.humaneval.smoke import check_mechanics, smoke_options  # noqa: E402

PROBLEMS = select(load_problems(), limit=5)  # HumanEval/0 .. /4
NEVER, WITH_REFLECTION = "HumanEval/3", "HumanEval/4"  # roles from smoke.ROLES


def run(options: RunOptions) -> Any:
    return anyio.run(run_benchmark, options)


def run_logs(work: Path) -> dict[str, int]:
    """How many run logs each mode's repository has: one per overnight run of it."""
    return {
        f"{repo.parent.name}/{repo.name}": len(list((repo / ".openagents" / "runs").glob("*[0-9a-f].jsonl")))
        for repo in sorted(work.glob("*/HumanEval-*"))
    }


def run_events_of(repo: Path) -> list[dict[str, Any]]:
    lines = [line for path in sorted((repo / ".openagents" / "runs").glob("*.jsonl"))
             for line in path.read_text().splitlines() if line.strip()]
    return [json.loads(line) for line in lines]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


@pytest.mark.slow
def test_smoke_run_builds_repos_runs_every_mode_and_writes_the_table(tmp_path):
    options = smoke_options(tmp_path / "work", PROBLEMS, parallel=2)

    results = run(options)

    assert check_mechanics(results, options) == []
    # One repository per problem and mode, each with the stub, the test and one task.
    for mode in MODES:
        for problem in PROBLEMS:
            repo = tmp_path / "work" / mode / problem.slug
            log = git(repo, "log", "--format=%s")
            assert log.splitlines()[-1] == f"{problem.task_id}: problem under test"
            assert git(repo, "status", "--porcelain") == ""
            tasks = (repo / ".openagents" / "tasks.jsonl").read_text().splitlines()
            assert len(tasks) == 1 and json.loads(tasks[0])["id"] == problem.slug
    # The hidden check is outside every repository; the test file only points at it.
    check = tmp_path / "work" / "checks" / "HumanEval-0.py"
    assert "def check(candidate)" in check.read_text()
    test_file = (tmp_path / "work" / "single" / "HumanEval-0" / "test_solution.py").read_text()
    assert str(check) in test_file and "def check" not in test_file

    # The problem that needs a reflection: solved at attempt 2 with reflexion only.
    by_mode = {m: results.modes[m].problems[WITH_REFLECTION] for m in MODES}
    assert by_mode["reflexion"].passed_at == 2 and by_mode["reflexion"].reflections == 1
    assert by_mode["raw"].passed_at is None and by_mode["raw"].attempts == 4
    assert by_mode["single"].passed_at is None and by_mode["single"].attempts == 1
    reflexion_repo = tmp_path / "work" / "reflexion" / "HumanEval-4"
    solution = (reflexion_repo / "solution.py").read_text()
    assert solution == PROBLEMS[4].prompt + PROBLEMS[4].canonical_solution
    # Without reflexion it escalated, and the failed attempts were taken out of the tree.
    raw_repo = tmp_path / "work" / "raw" / "HumanEval-4"
    assert (raw_repo / "solution.py").read_text() == solution_stub(PROBLEMS[4])

    # The never-solved problem gives back its failed code at every retry: each retry is
    # asked again, then counted without a test run; every failed attempt is reflected on,
    # so the escalation and the memory say why the last one failed too.
    never = results.modes["reflexion"].problems[NEVER]
    assert (never.outcome, never.attempts, never.reflections) == ("failed", 4, 4)
    assert (never.repeats_asked_again, never.repeats_counted) == (3, 3)
    assert (tmp_path / "work" / "reflexion" / "HumanEval-3" / ".openagents" / "escalations").is_dir()
    verdicts = [e for e in run_events_of(tmp_path / "work" / "reflexion" / "HumanEval-3") if e["event"] == "verdict"]
    assert len(verdicts) == 1  # the repeats were never tested again

    # Metering: every attempt, re-ask and reflection (the task's outcome reflection too) is a
    # priced model call.
    reflexion = results.modes["reflexion"].problems
    assert sum(r.calls for r in reflexion.values()) == 3 + (1 + 1 + 3 * 2 + 1) + (2 + 1 + 1)
    # Every reply was applicable: the first ones, and all of them.
    assert all(r.first_applied and r.replies_applied == r.replies for r in reflexion.values())
    assert all(r.cost_usd and r.cost_usd > 0 and r.input_tokens > 0 for r in reflexion.values())
    # The two problems that needed retries end with their outcome reflection: a lesson for
    # later tasks, counted apart; modes without reflexion write none.
    assert {k: r.lesson_tokens > 0 for k, r in reflexion.items()} == {
        p.task_id: p.task_id in (NEVER, WITH_REFLECTION) for p in PROBLEMS}
    assert all(r.lesson_tokens == 0 for m in ("single", "raw", "resample") for r in results.modes[m].problems.values())

    # The JSON result file and the markdown table with one column per attempt.
    saved = json.loads(options.results_path.read_text())
    assert saved["modes"]["reflexion"]["problems"][WITH_REFLECTION]["passedAt"] == 2
    table = options.markdown_path.read_text()
    assert "| mode | finished | after 1 | after 2 | after 3 | after 4 |" in table
    assert "| reflexion retries | 5/5 | 60.0% (3) | 80.0% (4) | 80.0% (4) | 80.0% (4) | 5 |" in table
    assert "| reflexion retries | 100.0% (5/5) | 100.0% (12/12) | whole 9 | 3 | 3 |" in table
    assert "| single attempt | 5/5 | 60.0% (3) | — | — | — | 0 |" in table
    assert "| HumanEval/4 | fail (1) | fail (4) | pass at 2 |" in table
    page = options.markdown_path.with_suffix(".html").read_text()  # the chart of pass-after-k per mode
    assert page.count("<polyline") == len(MODES) and "reflexion retries" in page and "<td>80.0% (4)</td>" in page
    assert not re.search(r'=[^"\s>]*/>', page)  # an unquoted value before "/>" hid every line in Chromium

    # Resampling: every retry the first prompt again, on the original tree, at 0.8; each
    # sample is tested; the comparison at reflexion's tokens is in the table.
    resampled = results.modes["resample"].problems
    assert (resampled[WITH_REFLECTION].passed_at, resampled[WITH_REFLECTION].attempts) == (None, 4)
    assert resampled[NEVER].repeats_asked_again == 0 and len(set(resampled[NEVER].attempt_tokens)) == 1
    resample_repo = tmp_path / "work" / "resample" / "HumanEval-3"
    config = json.loads((resample_repo / ".openagents" / "project.json").read_text())
    assert config["retry"]["fresh"] is True and config["modelTemperature"] == 0.8
    assert results.modes["resample"].settings.temperature == 0.8
    assert len([e for e in run_events_of(resample_repo) if e["event"] == "verdict"]) == 4
    assert len([e for e in run_events_of(resample_repo) if e["event"] == "fresh_retry"]) == 3
    assert "| fresh samples (resampling) | 5/5 | 60.0% (3) | 60.0% (3) |" in table
    assert "## Repair against resampling at equal tokens" in table
    assert re.search(r"\| fresh samples \(resampling\), within the tokens of reflexion retries \| 3/5 \|", table)

    # Run again: every problem is finished, so nothing runs and nothing changes.
    logs_before = run_logs(tmp_path / "work")
    again = run(smoke_options(tmp_path / "work", PROBLEMS, parallel=2))
    assert run_logs(tmp_path / "work") == logs_before
    assert again.modes == results.modes


@pytest.mark.slow
def test_an_interrupted_run_resumes_where_it_stopped(tmp_path):
    work = tmp_path / "work"
    options = smoke_options(work, PROBLEMS, parallel=1, modes=[MODES["raw"]])

    async def stop_after_first_problem() -> None:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as group:
                group.start_soon(run_benchmark, options)
                while not _finished(options.results_path, "raw"):
                    await anyio.sleep(0.02)
                scope.cancel()  # like Ctrl-C: the problem in flight is left unfinished

    anyio.run(stop_after_first_problem)
    first = _finished(options.results_path, "raw")
    assert 1 <= len(first) < 5
    logs_before = run_logs(work)

    results = run(smoke_options(work, PROBLEMS, parallel=2))

    assert check_mechanics(results, smoke_options(work, PROBLEMS)) == []
    logs_after = run_logs(work)
    for problem_id in first:  # finished before the interruption: not run again
        name = "raw/" + problem_id.replace("/", "-")
        assert logs_after[name] == logs_before[name] == 1
    # A problem whose result was lost (killed before the file was written) is read back
    # from its repository without another model call.
    data = json.loads(options.results_path.read_text())
    kept = data["modes"]["raw"]["problems"].pop(NEVER)
    options.results_path.write_text(json.dumps(data))
    again = run(smoke_options(work, PROBLEMS, parallel=2))
    restored = again.modes["raw"].problems[NEVER].to_dict()
    assert {k: v for k, v in restored.items() if k != "wallS"} == {k: v for k, v in kept.items() if k != "wallS"}


@pytest.mark.slow
def test_a_problem_a_killed_run_left_unfinished_starts_again_from_its_stub(tmp_path):
    work = tmp_path / "work"
    options = smoke_options(work, PROBLEMS, parallel=2, modes=[MODES["raw"]])
    run(options)
    # As a kill -9 mid-problem leaves it: attempts made, the task still open, no result saved.
    repo = work / "raw" / NEVER.replace("/", "-")
    tasks = repo / ".openagents" / "tasks.jsonl"
    lines = [json.loads(line) for line in tasks.read_text().splitlines() if line.strip()]
    for line in lines:
        line["status"] = "in_progress"
    tasks.write_text("".join(json.dumps(line) + "\n" for line in lines))
    data = json.loads(options.results_path.read_text())
    del data["modes"]["raw"]["problems"][NEVER]
    options.results_path.write_text(json.dumps(data))

    again = run(smoke_options(work, PROBLEMS, parallel=2, modes=[MODES["raw"]]))

    redone = again.modes["raw"].problems[NEVER]
    assert (redone.outcome, redone.attempts) == ("failed", MODES["raw"].max_attempts)  # not 4 more on top
    assert run_logs(work)["raw/" + NEVER.replace("/", "-")] == 1  # a new repository, one run


def _finished(path: Path, mode: str) -> list[str]:
    try:
        return list(json.loads(path.read_text())["modes"][mode]["problems"])
    except (FileNotFoundError, KeyError, json.JSONDecodeError):
        return []


def test_compare_two_result_files_side_by_side(tmp_path):
    results = run(smoke_options(tmp_path / "work", PROBLEMS, parallel=2, modes=[MODES["single"]]))
    other = results.model_copy(deep=True)
    other.modes["single"].problems[NEVER].passed_at = 1
    other.modes["single"].problems[NEVER].outcome = "passed"

    text = report.compare(results, other, ("before", "after"))

    assert "| single attempt · before | 5/5 | 60.0% (3) |" in text
    assert "| single attempt · after | 5/5 | 80.0% (4) |" in text
    assert "## Problems whose outcome differs (1)" in text
    assert "| HumanEval/3 | fail (1) → pass at 1 |" in text


def test_work_dir_inside_the_checkout_and_a_model_switch_are_refused(tmp_path):
    inside = smoke_options(tmp_path / "work", PROBLEMS)
    inside.work = ROOT / "humaneval-work"
    with pytest.raises(HarnessError, match="inside the goldenloop checkout"):
        run(inside)
    assert not (ROOT / "humaneval-work").exists()

    options = smoke_options(tmp_path / "work", PROBLEMS, modes=[MODES["single"]])
    run(options)
    options.model = "gpt-4o"
    with pytest.raises(HarnessError, match="holds results for model scripted/"):
        run(options)


def test_a_model_that_cannot_answer_stops_the_run_without_recording_verdicts(tmp_path, monkeypatch):
    options = smoke_options(tmp_path / "work", PROBLEMS, parallel=1, modes=[MODES["single"]])
    script = Path(options.model.removeprefix("scripted/"))
    script.write_text(json.dumps({"replies": [{"error": "auth", "times": None}]}))

    with pytest.raises(HarnessError, match="3 problems in a row ended without a verdict"):
        run(options)

    saved = json.loads(options.results_path.read_text())
    assert saved["modes"]["single"]["problems"] == {}  # they run again on the next run
    board = (tmp_path / "work" / "single" / "HumanEval-0" / ".openagents" / "tasks.jsonl").read_text()
    assert json.loads(board)["status"] == "open"

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    keyless = RunOptions(model="gpt-4o", work=tmp_path / "other", problems=PROBLEMS[:1], modes=[MODES["single"]])
    with pytest.raises(HarnessError, match="OPENAI_API_KEY"):
        run(keyless)


@pytest.mark.slow
def test_the_control_asks_the_model_directly_on_the_same_problems(tmp_path):
    options = smoke_options(tmp_path / "work", PROBLEMS, parallel=2, modes=[MODES["single"], CONTROL])

    results = run(options)

    assert check_mechanics(results, options) == []
    control = results.modes["control"].problems
    assert [control[p.task_id].passed_at for p in PROBLEMS] == [1, 1, 1, None, None]
    assert all(r.calls == 1 and r.cost_usd and r.cost_usd > 0 for r in control.values())
    assert control[NEVER].reason and control[NEVER].reason != "passed"  # why it failed, in a line
    table = options.markdown_path.read_text()
    assert "| direct prompt (control) | 5/5 | 60.0% (3) | — | — | — |" in table
    assert "| single attempt | 5/5 | 60.0% (3) |" in table
    assert not (tmp_path / "work" / "control").exists()  # no repositories: one call per problem


def test_an_unknown_cost_stays_unknown_when_the_result_file_is_read_back(tmp_path):
    options = smoke_options(tmp_path / "work", PROBLEMS, parallel=2, modes=[MODES["single"]])
    script = Path(options.model.removeprefix("scripted/"))
    body = json.loads(script.read_text())
    del body["pricing"]  # a model litellm cannot price
    script.write_text(json.dumps(body))

    run(options)

    saved = json.loads(options.results_path.read_text())
    assert all("costUsd" not in r for r in saved["modes"]["single"]["problems"].values())
    reloaded = ResultFile.load(options.results_path)
    assert all(r.cost_usd is None for r in reloaded.modes["single"].problems.values())
    row = report.summary_row(summarize(reloaded, "single"))
    assert "unknown" in row and "$0.0000" not in row
    compared = report.compare(reloaded, reloaded, ("a", "b"))
    assert "$0.0000" not in compared and compared.count("| unknown |") == 2


def test_the_reflection_timeout_follows_the_model_timeout_or_its_own_flag(tmp_path):
    args = parse_args(["--model", "m", "--model-timeout", "300"])
    options = options_from(args)
    config = project_config(MODES["reflexion"], "m", verify_timeout_s=60, model_timeout_s=300,
                            reflection_timeout_s=options.reflection_seconds)
    assert config["reflexion"]["generationTimeoutMs"] == 300_000
    options = options_from(parse_args(["--model", "m", "--reflection-timeout", "45"]))
    assert options.reflection_seconds == 45
    with pytest.raises(SystemExit):
        parse_args(["--model", "m", "--reflection-timeout", "0"])


def test_greedy_resampling_is_refused_and_resample_samples_by_default():
    with pytest.raises(ValueError, match="--modes resample draws independent samples.*--resample-temperature 0"):
        options_from(parse_args(["--model", "m", "--modes", "reflexion,resample", "--resample-temperature", "0"]))
    both = options_from(parse_args(["--model", "m", "--modes", "reflexion,resample", "--temperature", "0"]))
    assert (both.temperature, both.resample_temperature) == (0, 0.8)  # greedy retries, sampled resampling
    resample = MODES["resample"]
    common = {"verify_timeout_s": 60, "model_timeout_s": 60}
    assert project_config(resample, "m", **common)["modelTemperature"] == 0.8
    assert project_config(resample, "m", temperature=0, resample_temperature=0.3, **common)["modelTemperature"] == 0.3
    assert project_config(MODES["reflexion"], "m", temperature=0, **common)["modelTemperature"] == 0
    assert project_config(MODES["raw"], "m", **common)["modelTemperature"] is None
    assert project_config(MODES["raw"], "m", **common)["retry"]["fresh"] is False


def test_a_reply_cap_reaches_every_call_and_a_resume_must_keep_it(tmp_path):
    capped = options_from(parse_args(["--model", "m", "--max-output-tokens", "1024", "--work", str(tmp_path)]))
    assert capped.max_output_tokens == 1024
    config = project_config(MODES["reflexion"], "m", verify_timeout_s=60, model_timeout_s=60, max_output_tokens=1024)
    assert config["maxOutputTokens"] == 1024
    with pytest.raises(SystemExit) as refused:
        parse_args(["--model", "m", "--max-output-tokens", "0"])
    assert refused.value.code == 2
    capped.work.mkdir(parents=True, exist_ok=True)
    ResultFile(model="m", dataset={}, protocol=protocol(capped)).save(capped.results_path)
    uncapped = options_from(parse_args(["--model", "m", "--work", str(tmp_path)]))
    with pytest.raises(HarnessError, match="--max-output-tokens"):
        open_results(uncapped)
