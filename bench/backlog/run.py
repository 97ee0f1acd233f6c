"""Run the bookshop's backlog through goldenloop's `overnight`, with the memory on and off.

Each mode works on its own copy of the repository (bench/backlog/template/), built once
and resumed on the next run (`overnight` picks up the tasks still open). The same model,
greedy by default; the only difference is `memory.crossTaskLessons`.

    python bench/backlog/run.py --smoke                 # offline, the scripted model
    python bench/backlog/run.py --model openai/qwen2.5-coder-1.5b-instruct --model-timeout 300
    python bench/backlog/run.py --model gpt-4o-mini --limit 8 --modes memory-on

Exit codes: 0 done, 1 the run stopped (overnight refused a copy, or the smoke's
mechanism broke), 2 usage error, 130 interrupted (run again to resume).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench.backlog` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import argparse
import json
import tempfile

import anyio

from bench.backlog.build import MODES, backlog_lines, build_repo, copy_acceptance, project_config
from bench.backlog.results import TaskResult, read_repo, save
from orchestrator.batch.engine import Budget, OvernightOptions, run_overnight_async
from orchestrator.session import Overrides

CHECKOUT = Path(__file__).resolve().parents[2]
EXIT_DONE, EXIT_STOPPED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class BenchError(Exception):
    """The run cannot go on; the message is one sentence for the user."""

    def __init__(self, message: str, exit_code: int = EXIT_STOPPED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/backlog/run.py",
                                     description="The bookshop's backlog with goldenloop's memory on and off.")
    parser.add_argument("--model", help="any litellm model name (not with --smoke)")
    parser.add_argument("--smoke", action="store_true", help="offline: the scripted model")
    parser.add_argument("--limit", type=int, help="the first N tasks of the backlog (default all 16)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--work", type=Path, help="where the copies go (default: under the temp dir)")
    parser.add_argument("--temperature", type=float, default=0.0, help="sampling temperature (default 0: greedy)")
    parser.add_argument("--verify-timeout", type=float, default=120.0, help="seconds per test run")
    parser.add_argument("--model-timeout", type=float, default=120.0, help="seconds per model call")
    parser.add_argument("--max-output-tokens", type=int,
                        help="the most tokens one reply may use (default: the model's own limit)")
    args = parser.parse_args(argv)
    if not args.smoke and not args.model:
        parser.error("--model is required (or --smoke)")
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be 1 or more")
    if args.max_output_tokens is not None and args.max_output_tokens < 1:
        parser.error("--max-output-tokens must be 1 or more")
    if not 0 <= args.temperature <= 2:
        parser.error("--temperature must be between 0 and 2")
    if min(args.verify_timeout, args.model_timeout) <= 0:
        parser.error("--verify-timeout and --model-timeout must be more than 0 seconds")
    unknown = [m for m in args.modes.split(",") if m.strip() and m.strip() not in MODES]
    if unknown or not args.modes.strip(","):
        parser.error(f"--modes takes a comma-separated list of {', '.join(MODES)} (got {args.modes!r})")
    return args


def work_dir(args: argparse.Namespace) -> Path:
    name = "smoke" if args.smoke else "".join(c if c.isalnum() or c in "-_." else "_" for c in args.model)[-80:]
    work = (args.work or Path(tempfile.gettempdir()) / "goldenloop-backlog" / name).resolve()
    if work == CHECKOUT or CHECKOUT in work.parents:
        raise BenchError(f"the work directory {work} is inside the goldenloop checkout; choose one outside it",
                         EXIT_USAGE)
    work.mkdir(parents=True, exist_ok=True)
    return work


async def run_mode(repo: Path, model: str) -> str:
    """One `overnight` over the copy's open tasks; why it stopped."""
    overrides = Overrides(model=model)  # wins over a GOLDENLOOP_MODEL a user may have set
    (report,) = await run_overnight_async(OvernightOptions(dirs=[repo], overrides=overrides, budget=Budget(),
                                                           parallel=1))
    if report.refused:
        raise BenchError(f"overnight refused {repo}: {report.refused}")
    return report.stop_reason


async def run_benchmark(args: argparse.Namespace, work: Path) -> tuple[str, dict[str, list[TaskResult]]]:
    model = args.model
    if args.smoke:
        from bench.backlog.smoke import write_script

        ids = [json.loads(line)["id"] for line in backlog_lines(args.limit)]
        model = write_script(ids, work / "smoke-script.json")
    acceptance = copy_acceptance(work)
    by_mode: dict[str, list[TaskResult]] = {}
    for mode in dict.fromkeys(m.strip() for m in args.modes.split(",") if m.strip()):
        config = project_config(model, MODES[mode], acceptance, temperature=args.temperature,
                                verify_timeout_s=args.verify_timeout, model_timeout_s=args.model_timeout,
                                repo=work / mode, max_output_tokens=args.max_output_tokens)
        repo = build_repo(work / mode, config, args.limit)
        stopped = await run_mode(repo, model)
        by_mode[mode] = read_repo(repo)
        save(work / "results.json", model, by_mode)
        if any(r.status in ("open", "in_progress") for r in by_mode[mode]):  # the model went away, say
            raise BenchError(f"{mode}: overnight stopped with tasks still open ({stopped}); run the same "
                             "command again to resume")
    return model, by_mode


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        work = work_dir(args)
        model, by_mode = anyio.run(run_benchmark, args, work)
    except BenchError as exc:
        print(f"backlog: {exc}")
        return exc.exit_code
    except KeyboardInterrupt:
        print("backlog: interrupted; run the same command again to resume")
        return EXIT_INTERRUPTED
    print((work / "results.md").read_text())
    print(f"results: {work / 'results.json'}\ntable:   {work / 'results.md'}")
    if args.smoke:
        from bench.backlog.smoke import check_mechanism

        broken = check_mechanism(by_mode)
        for line in broken:
            print(f"smoke: {line}")
        return EXIT_STOPPED if broken else EXIT_DONE
    return EXIT_DONE


if __name__ == "__main__":
    sys.exit(main())
