"""`overnight`: the golden loop over one or more backlogs, with a live board and a summary.

With `--queue URL` the backlogs go to a fleet of workers instead (orchestrator/commands/fleet.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import anyio

from orchestrator.batch.display import make_display, print_summary
from orchestrator.batch.engine import Budget, OvernightOptions, exit_code_for, run_overnight_async
from orchestrator.commands.console import interruptible, overrides_from, setup_output
from orchestrator.session import EXIT_INTERRUPTED


def run_overnight(args: argparse.Namespace) -> int:
    """The `overnight` command: parse budgets, run, print the summary table."""
    base_listener = setup_output(args.json)
    display = make_display(args.json, base_listener)
    budget = Budget(
        max_tasks=args.max_tasks,
        max_seconds=args.max_hours * 3600 if args.max_hours is not None else None,
        max_cost=args.max_cost,
    )
    options = OvernightOptions(
        dirs=[Path(d) for d in args.dirs],
        overrides=overrides_from(args),
        budget=budget,
        parallel=args.parallel,
        listeners=[display],
    )
    with display:
        _, interrupted = anyio.run(interruptible, lambda: run_overnight_async(options))
    reports = options.reports
    print_summary(reports, budget, json_mode=args.json, interrupted=interrupted)
    return EXIT_INTERRUPTED if interrupted else exit_code_for(reports)
