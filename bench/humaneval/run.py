"""Run HumanEval through goldenloop's `overnight`, in up to four modes, and resume.

Each problem is its own repository (see build.py), so K problems run at once as K
in-process `overnight` runs of one repository each: `overnight --parallel` spreads the
tasks of one repository over worktrees, and here every repository has one task. Each
mode works on its own copy of the repositories, so no mode sees another's commits or
reflections. The result file is rewritten after every problem; a rerun skips finished
problems, and goldenloop's own crash recovery takes back a problem a kill interrupted.

    python bench/humaneval/run.py --model gpt-4o --limit 20 --parallel 4
    python bench/humaneval/run.py --model openai/qwen2.5-coder --problems 0,5,17 --modes single,reflexion
    python bench/humaneval/run.py --smoke            # offline, the scripted model, 5 problems
    python bench/humaneval/run.py --model M --control   # and the model asked directly, beside them
    python bench/humaneval/run.py --model M --modes reflexion,resample   # repair against resampling

Exit codes: 0 done, 1 the run stopped (the model refused or unreachable, or the smoke
mechanics broke), 2 usage error, 130 interrupted (run again to resume).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench.humaneval` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse
import logging
import tempfile
import time
from collections.abc import Iterator

import anyio

from bench.humaneval.build import build_repo, is_built, project_config
from bench.humaneval.chart import write_html
from bench.humaneval.control import run_control
from bench.humaneval.modes import (
    CONTROL,
    FIXED_TRIALS,
    MAX_ATTEMPTS,
    MODES,
    RESAMPLE_TEMPERATURE,
    Mode,
    greedy_resampling,
    parse_modes,
)
from bench.humaneval.options import RunOptions
from bench.humaneval.problems import Problem, ProblemError, dataset_info, load_problems, parse_ids, select
from bench.humaneval.report import write_markdown
from bench.humaneval.results import ModeRecord, ModeSettings, ProblemResult, ResultFile, result_from_repo
from bench.humaneval.shared_record import SharedRecord, memory_name
from orchestrator.batch.engine import Budget, OvernightOptions, RepoReport, run_overnight_async
from orchestrator.session import Overrides
from reflection.llm import LiteLLMModel, ModelError

log = logging.getLogger("goldenloop.bench.humaneval")

CHECKOUT = Path(__file__).resolve().parents[2]
UNFINISHED_TO_STOP = 3  # problems in a row that end without a verdict: the model is gone
EXIT_DONE, EXIT_STOPPED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class HarnessError(Exception):
    """The run cannot go on; the message is one sentence for the user."""

    def __init__(self, message: str, exit_code: int = EXIT_STOPPED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


async def run_benchmark(options: RunOptions) -> ResultFile:
    """Every selected problem in every mode; finished ones (from an earlier run) are skipped."""
    options.work = options.work.resolve()
    check_work_dir(options.work)
    results = open_results(options)
    try:
        for mode in options.modes:
            runner = ControlRun if mode.name == CONTROL.name else ModeRun
            await runner(options, results, mode).run()
    finally:
        write_markdown(results, options.markdown_path)
        write_html(results, options.markdown_path.with_suffix(".html"))
    return results


def check_work_dir(work: Path) -> None:
    if work == CHECKOUT or CHECKOUT in work.parents:
        raise HarnessError(
            f"the work directory {work} is inside the goldenloop checkout; choose one outside it", EXIT_USAGE
        )
    work.mkdir(parents=True, exist_ok=True)


def protocol(options: RunOptions) -> dict[str, object]:
    cap = {"maxOutputTokens": options.max_output_tokens} if options.max_output_tokens else {}  # old files lack it
    return {
        "maxAttempts": MAX_ATTEMPTS,
        "retry": FIXED_TRIALS,
        "testsHidden": True,
        "verifySeconds": options.verify_timeout_s,
        "modelSeconds": options.model_timeout_s,
        "reflectionSeconds": options.reflection_seconds,
        "editFormat": options.edit_format,
        "temperature": options.temperature,
        "resampleTemperature": options.resample_temperature,
        **cap,
    }


def open_results(options: RunOptions) -> ResultFile:
    """The existing result file of this model (to resume), or a new one."""
    path = options.results_path
    results = ResultFile.load(path)
    if results is None:
        results = ResultFile(model=options.model, dataset=dataset_info(), protocol=protocol(options))
    elif results.model != options.model:
        raise HarnessError(
            f"{path} holds results for model {results.model}, not {options.model}; "
            "pass another --work or --out",
            EXIT_USAGE,
        )
    elif results.protocol != protocol(options):
        raise HarnessError(
            f"{path} was started with other settings ({results.protocol}); resume with the same "
            "--verify-timeout, --model-timeout, --reflection-timeout, --edit-format, --temperature, "
            "--resample-temperature and --max-output-tokens, or pass "
            "another --work or --out",
            EXIT_USAGE,
        )
    results.selection = list(dict.fromkeys([*results.selection, *(p.task_id for p in options.problems)]))
    results.save(path)
    return results


class ModeRun:
    """One mode over the selected problems, `parallel` at a time."""

    def __init__(self, options: RunOptions, results: ResultFile, mode: Mode) -> None:
        self.options = options
        self.results = results
        self.mode = mode
        settings = ModeSettings(label=mode.label, reflexion=mode.reflexion, max_attempts=mode.max_attempts,
                                fresh=mode.fresh,
                                temperature=mode.temperature(options.temperature, options.resample_temperature))
        self.record = results.modes.setdefault(mode.name, ModeRecord(settings=settings))
        self.config = project_config(
            mode, options.model,
            verify_timeout_s=options.verify_timeout_s, model_timeout_s=options.model_timeout_s,
            reflection_timeout_s=options.reflection_seconds, edit_format=options.edit_format,
            temperature=options.temperature, resample_temperature=options.resample_temperature,
            max_output_tokens=options.max_output_tokens,
        )
        self.stop_reason: str | None = None
        self.unfinished_in_a_row = 0
        self.choices = SharedRecord(options.work / mode.name / "retry-choices.json")

    async def run(self) -> None:
        pending = [p for p in self.options.problems if p.task_id not in self.record.problems]
        done = len(self.options.problems) - len(pending)
        log.info("%s: %d problem(s) to run, %d already finished", self.mode.name, len(pending), done)
        if not pending:
            return
        queue = iter(pending)  # shared by the workers: each problem is taken once
        wall_before, started = self.record.wall_s, time.monotonic()
        try:
            async with anyio.create_task_group() as group:
                for _ in range(min(self.options.parallel, len(pending))):
                    group.start_soon(self._worker, queue)
        finally:  # an interrupted run's time counts too
            self.record.wall_s = round(wall_before + time.monotonic() - started, 3)
            self.results.save(self.options.results_path)
        if self.stop_reason:
            raise HarnessError(self.stop_reason)

    async def _worker(self, queue: Iterator[Problem]) -> None:
        for problem in queue:
            if self.stop_reason:
                return
            await self._run_problem(problem)

    async def _run_problem(self, problem: Problem) -> None:
        repo = self.options.work / self.mode.name / problem.slug
        checks = self.options.work / "checks"
        if is_built(repo):  # killed after its task finished, before the result was saved
            kept = await anyio.to_thread.run_sync(result_from_repo, repo, problem.slug, 0.0)
            if kept is not None:
                self._keep(problem, kept)
                return
        seeded = self.choices.seed()
        await anyio.to_thread.run_sync(build_repo, problem, repo, self.config, checks, {memory_name(): seeded})
        started = time.monotonic()
        report = await self._overnight(repo)
        wall = time.monotonic() - started
        if report.refused:
            self.stop_reason = f"overnight refused {repo}: {report.refused}"
            return
        result = await anyio.to_thread.run_sync(result_from_repo, repo, problem.slug, wall)
        self.choices.add_back(repo, seeded)
        if result is None:
            self._unfinished(problem, report)
            return
        self._keep(problem, result)

    def _keep(self, problem: Problem, result: ProblemResult) -> None:
        self.unfinished_in_a_row = 0
        self.record.problems[problem.task_id] = result
        self.results.save(self.options.results_path)
        shown = f"passed at attempt {result.passed_at}" if result.passed_at else f"failed after {result.attempts}"
        log.info("%s %s: %s", self.mode.name, problem.task_id, shown)

    async def _overnight(self, repo: Path) -> RepoReport:
        # The command line's overrides win over GOLDENLOOP_* variables a user may have set.
        overrides = Overrides(
            model=self.options.model, reflexion=self.mode.reflexion, max_retries=self.mode.max_retries
        )
        options = OvernightOptions(dirs=[repo], overrides=overrides, budget=Budget(), parallel=1)
        (report,) = await run_overnight_async(options)
        return report

    def _unfinished(self, problem: Problem, report: RepoReport | None, why: str = "") -> None:
        if report is not None:
            why = "; ".join(f"{o.status}: {o.reason}" for o in report.outcomes) or report.stop_reason
        log.warning("%s %s: no verdict (%s); it runs again on the next run", self.mode.name, problem.task_id, why)
        self.unfinished_in_a_row += 1
        if self.unfinished_in_a_row >= UNFINISHED_TO_STOP:
            self.stop_reason = f"{UNFINISHED_TO_STOP} problems in a row ended without a verdict; last: {why}"


class ControlRun(ModeRun):
    """The model asked directly for each function: the row that goldenloop is measured against."""

    def __init__(self, options: RunOptions, results: ResultFile, mode: Mode) -> None:
        super().__init__(options, results, mode)
        self.model = LiteLLMModel(options.model, timeout=options.model_timeout_s, temperature=options.temperature)

    async def _run_problem(self, problem: Problem) -> None:
        try:
            result = await run_control(
                problem, self.model,
                model_timeout_s=self.options.model_timeout_s, check_timeout_s=self.options.verify_timeout_s,
                max_tokens=self.options.max_output_tokens,
            )
        except ModelError as exc:
            self._unfinished(problem, None, str(exc))
            return
        self.unfinished_in_a_row = 0
        self.record.problems[problem.task_id] = result
        self.results.save(self.options.results_path)
        log.info("%s %s: %s", self.mode.name, problem.task_id, result.outcome)


# -- the command ------------------------------------------------------------------------


def default_work(model: str) -> Path:
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in model)[-80:]
    return Path(tempfile.gettempdir()) / "goldenloop-humaneval" / slug


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/humaneval/run.py", description="HumanEval pass rates with goldenloop, in four retry modes."
    )
    parser.add_argument("--model", help="any litellm model name (not with --smoke)")
    parser.add_argument("--limit", type=int, help="the first N selected problems")
    parser.add_argument("--problems", help="problem ids, e.g. 0,5,HumanEval/17 (default: all 164)")
    parser.add_argument("--parallel", type=int, default=1, help="problems run at once (default 1)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--work", type=Path, help="where the repositories go (default: under the temp dir)")
    parser.add_argument("--out", type=Path, help="the result file (default <work>/results.json)")
    parser.add_argument("--verify-timeout", type=float, default=60.0, help="seconds per test run")
    parser.add_argument("--model-timeout", type=float, default=120.0, help="seconds per model call")
    parser.add_argument(
        "--reflection-timeout", type=float, help="seconds per reflection call (default: --model-timeout)"
    )
    parser.add_argument(
        "--edit-format", default="auto", choices=["auto", "whole", "search-replace", "diff"],
        help="the executor's editFormat (default auto)",
    )
    parser.add_argument(
        "--temperature", type=float,
        help="sampling temperature of every mode but resample (default: the provider's; 0: greedy)",
    )
    parser.add_argument(
        "--resample-temperature", type=float, default=RESAMPLE_TEMPERATURE,
        help=f"sampling temperature of the resample mode (default {RESAMPLE_TEMPERATURE}; must be above 0)",
    )
    parser.add_argument(
        "--max-output-tokens", type=int,
        help="the most tokens one reply may use, in every mode and the control (default: the model's own limit)",
    )
    parser.add_argument(
        "--control", action="store_true", help="also ask the model directly, once per problem, for comparison"
    )
    parser.add_argument("--smoke", action="store_true", help="offline: the scripted model on 5 problems")
    args = parser.parse_args(argv)
    if args.parallel < 1:
        parser.error("--parallel must be 1 or more")
    if not args.smoke and not args.model:
        parser.error("--model is required (or --smoke)")
    if args.max_output_tokens is not None and args.max_output_tokens < 1:
        parser.error("--max-output-tokens must be 1 or more")
    if args.temperature is not None and not 0 <= args.temperature <= 2:
        parser.error("--temperature must be between 0 and 2")
    if not 0 <= args.resample_temperature <= 2:
        parser.error("--resample-temperature must be between 0 and 2")
    for name in ("verify_timeout", "model_timeout", "reflection_timeout"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            parser.error(f"--{name.replace('_', '-')} must be more than 0 seconds")
    return args


def options_from(args: argparse.Namespace) -> RunOptions:
    ids = parse_ids(args.problems) if args.problems else None
    problems = select(load_problems(), ids=ids, limit=args.limit)
    modes = parse_modes(args.modes)
    if args.control and CONTROL not in modes:
        modes.append(CONTROL)
    refused = greedy_resampling(modes, args.resample_temperature)
    if refused:
        raise ValueError(refused)
    if args.smoke:
        from bench.humaneval.smoke import smoke_options

        work = args.work or Path(tempfile.gettempdir()) / "goldenloop-humaneval" / "smoke"
        return smoke_options(work.resolve(), problems, parallel=args.parallel, modes=modes, out=args.out)
    return RunOptions(
        model=args.model,
        work=(args.work or default_work(args.model)).resolve(),
        problems=problems,
        modes=modes,
        parallel=args.parallel,
        out=args.out,
        verify_timeout_s=args.verify_timeout,
        model_timeout_s=args.model_timeout,
        reflection_timeout_s=args.reflection_timeout,
        edit_format=args.edit_format,
        temperature=args.temperature,
        resample_temperature=args.resample_temperature,
        max_output_tokens=args.max_output_tokens,
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    log.setLevel(logging.INFO)
    try:
        options = options_from(args)
        results = anyio.run(run_benchmark, options)
    except (ProblemError, ValueError) as exc:
        print(f"humaneval: {exc}")
        return EXIT_USAGE
    except HarnessError as exc:
        print(f"humaneval: {'stopped: ' if exc.exit_code == EXIT_STOPPED else ''}{exc}")
        return exc.exit_code
    except KeyboardInterrupt:
        print("humaneval: interrupted; run the same command again to resume")
        return EXIT_INTERRUPTED
    print(options.markdown_path.read_text())
    print(f"results: {options.results_path}\ntable:   {options.markdown_path}")
    if args.smoke:
        from bench.humaneval.smoke import check_mechanics

        broken = check_mechanics(results, options)
        for line in broken:
            print(f"smoke: {line}")
        return EXIT_STOPPED if broken else EXIT_DONE
    return EXIT_DONE


if __name__ == "__main__":
    sys.exit(main())
