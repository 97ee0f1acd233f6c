"""Command line: `do-one-task`, `overnight`, `goldenloop memory`, `history`, `serve`, the backlog's
`init`, `add`, `list`, `status`, `show`, `reopen`, `retry` and `import`, and the fleet's `worker`,
`enqueue` and `fleet status|report|cancel` (docs/FLEET.md).

Only argparse is imported at start-up, so `--help` is instant; the engine (and litellm,
lazily, inside the model client) is imported when a command runs.

Exit codes: 0 done, 1 escalated/blocked, 2 usage or config error, 3 no ready task,
4 repository refused (dirty, locked), 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

EXIT_CODES = (
    "exit codes: 0 done, 1 escalated or blocked, 2 usage or config error, "
    "3 no ready task, 4 repository refused (dirty or locked), 130 interrupted"
)


def _number(kind: type, minimum: float, above: bool = False):
    """An argparse type that reads a number and refuses one out of range in one line."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not (value > minimum if above else value >= minimum):  # also refuses nan
            bound = f"more than {minimum}" if above else f"{minimum} or more"
            raise argparse.ArgumentTypeError(f"must be {bound}, not {text}")
        return value

    return parse


def _port(text: str) -> int:
    port = _number(int, 0)(text)
    if port > 65535:
        raise argparse.ArgumentTypeError(f"must be a port number from 0 to 65535, not {text}")
    return port


Command = Callable[..., int]


def version() -> str:
    """The installed goldenloop's version (read from its metadata: no engine import)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("goldenloop")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "(not installed)"


def _lazy(parser: Callable[[], argparse.ArgumentParser], target: str, *leading: str) -> Command:
    """A command that parses its arguments, then imports `target` ("module:function") and
    calls it with `*leading` and them: the command's module loads only when it runs."""

    def run(argv: list[str] | None = None) -> int:
        command = parser()
        command.add_argument("--version", action="version", version=f"%(prog)s {version()}")
        args = command.parse_args(argv)
        module, _, function = target.partition(":")
        return getattr(importlib.import_module(module), function)(*leading, args)

    return run


def do_one_task_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="do-one-task",
        description="Run the golden loop on one task of a repository's backlog: "
        "decompose, execute, verify, commit; reflect and retry on failure.",
        epilog=EXIT_CODES,
    )
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="the repository (default: here)")
    parser.add_argument("--task", metavar="ID", help="run this task instead of the next ready one")
    _add_shared(parser)
    return parser


def _add_shared(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", metavar="M", help="litellm model name (overrides project.json)")
    parser.add_argument(
        "--api-base", metavar="URL",
        help="the model server's base URL, e.g. http://localhost:8000/v1 for vLLM (overrides model.apiBase)",
    )
    parser.add_argument(
        "--no-reflexion", action="store_true", help="retry with the raw failure only, no reflections"
    )
    parser.add_argument("--max-retries", type=_number(int, 0), metavar="N", help="retries per subtask (default 3)")
    parser.add_argument("--json", action="store_true", help="print the run's events as JSON lines")
    parser.add_argument(
        "--allow-dirty",
        action="store_true",
        help="run even with uncommitted changes (they are left alone and never committed)",
    )


def overnight_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="overnight",
        description="Run the golden loop over the backlogs of one or more repositories "
        "until a budget or the backlogs run out. Safe to stop at any moment.",
        epilog="exit codes: 0 every task run was closed (or the backlogs were empty), "
        "1 a task was escalated, blocked or stopped, 2 usage or config error, "
        "4 a repository was refused (dirty or locked), 130 interrupted; with --queue see docs/FLEET.md "
        "(3: no ready task in any repository)",
    )
    parser.add_argument("dirs", nargs="+", metavar="DIR",
                        help="repositories (with --queue: their git URLs, e.g. git@host:team/app.git)")
    _add_limits(parser)
    parser.add_argument("--parallel", type=_number(int, 1), metavar="K", help="tasks at once, each in its own worktree")
    _add_shared(parser)
    fleet = parser.add_argument_group("a fleet of workers (docs/FLEET.md)")
    fleet.add_argument("--queue", metavar="URL",
                       help="put the tasks on this PostgreSQL queue for `goldenloop worker`s, follow the run, "
                       "write its report (a password: better in PGPASSWORD or ~/.pgpass)")
    _add_fleet_files(fleet)
    fleet.add_argument("--run", metavar="ID", help=RUN_HELP)
    return parser


FLEET_WORKDIR = Path("~/.cache/goldenloop/fleet")
RUN_HELP = ("add to this run, as `enqueue` printed its id (its limits stay; it must exist and not be cancelled) "
            "instead of starting one")


def _add_limits(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-tasks", type=_number(int, 1), metavar="N", help="start at most N tasks")
    parser.add_argument("--max-hours", type=_number(float, 0, above=True), metavar="H", help="stop after H hours")
    parser.add_argument("--max-cost", type=_number(float, 0), metavar="USD", help="stop before spending more")


def _add_fleet_files(parser: argparse.ArgumentParser | Any) -> None:  # a parser or an argument group
    parser.add_argument("--workdir", type=Path, default=FLEET_WORKDIR, metavar="DIR",
                        help="where this machine keeps its clones (default ~/.cache/goldenloop/fleet)")
    parser.add_argument("--out", type=Path, default=Path("."), metavar="DIR",
                        help="where the run's report and summary are written (default: here)")


def overnight_main(argv: list[str] | None = None) -> int:
    parser = overnight_parser()
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    args = parser.parse_args(argv)
    if args.queue:
        from orchestrator.commands.fleet import run_overnight_fleet

        return run_overnight_fleet(args)
    from orchestrator.commands.overnight import run_overnight

    return run_overnight(args)


FLEET_EXIT_CODES = ("exit codes: 0 done, 1 a task was blocked or not closed (overnight, fleet status --follow) or "
                    "no such run (an id that is not a run's, or a cancelled run to add to), 2 usage or config error "
                    "(no queue, a database that cannot be reached, a repository that cannot be cloned or has no "
                    "backlog), 3 nothing queued (no ready task, or every one already queued), 130 interrupted")
QUEUE_HELP = "the PostgreSQL queue, postgresql://user@host/db (default: $GOLDENLOOP_QUEUE)"


def worker_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="goldenloop worker",
        description="Work the fleet's queue: take a job (one task of one repository), run the golden loop on it "
        "in a worktree of this worker's own, integrate it into the repository's base branch, take the next.",
        epilog="exit codes: 0 stopped (--until-empty: no job left), 2 usage or config error "
        "(no queue, a database that cannot be reached), 130 stopped by a signal (the task in flight went back "
        "to the queue)",
    )
    parser.add_argument("--queue", metavar="URL", help=QUEUE_HELP)
    parser.add_argument("--workdir", type=Path, default=FLEET_WORKDIR, metavar="DIR",
                        help="clones and worktrees; shared by the workers of one machine "
                        "(default ~/.cache/goldenloop/fleet)")
    parser.add_argument("--name", metavar="NAME", help="how reports name this worker (default: host-pid)")
    parser.add_argument("--lease", type=_number(float, 0.5), default=60.0, metavar="S",
                        help="a job whose worker sent no heartbeat for S seconds goes to another (default 60)")
    parser.add_argument("--model", metavar="M", help="litellm model name (overrides each project.json)")
    parser.add_argument("--api-base", metavar="URL", help="the model server's base URL (overrides model.apiBase)")
    parser.add_argument("--memory", metavar="URL|project",
                        help="where reflections and lessons live: a postgresql:// URL, or 'project' for what each "
                        "project.json says (default: the queue's database, shared by the fleet)")
    parser.add_argument("--until-empty", action="store_true", help="exit once no job waits or runs")
    parser.add_argument("--json", action="store_true", help="print events as JSON lines")
    return parser


def enqueue_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="goldenloop enqueue",
        description="Put the ready tasks of repositories on the fleet's queue, as one run with one budget; "
        "prints the run's id. Workers queue the tasks that become ready as the run goes.",
        epilog=FLEET_EXIT_CODES,
    )
    parser.add_argument("repos", nargs="+", metavar="REPO_URL", help="git URLs (no password in them)")
    parser.add_argument("--queue", metavar="URL", help=QUEUE_HELP)
    _add_limits(parser)
    parser.add_argument("--run", metavar="ID", help=RUN_HELP)
    parser.add_argument("--workdir", type=Path, default=FLEET_WORKDIR, metavar="DIR",
                        help="where this machine keeps its clones (default ~/.cache/goldenloop/fleet)")
    parser.add_argument("--json", action="store_true", help="print JSON lines")
    return parser


def fleet_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="goldenloop fleet", description="A fleet run: how it goes, its report, "
                                     "cancelling it.", epilog=FLEET_EXIT_CODES)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("run", nargs="?", metavar="RUN", help="the run's id, as `enqueue` printed it "
                        "(default: the newest)")
    common.add_argument("--queue", metavar="URL", help=QUEUE_HELP)
    common.add_argument("--json", action="store_true", help="print JSON lines")
    reporting = argparse.ArgumentParser(add_help=False)
    _add_fleet_files(reporting)  # --workdir: the mirrors the report reads each backlog's tip through
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    status = sub.add_parser("status", parents=[common, reporting],
                            help="jobs, spending, the live workers and the last outcomes of a run")
    status.add_argument("--follow", action="store_true", help="print each job's end until the run ends, then "
                        "write its report")
    sub.add_parser("report", parents=[common, reporting], help="write the run's morning report and summary JSON")
    cancel = sub.add_parser("cancel", parents=[common], help="cancel the run's waiting jobs and queue nothing "
                            "more into it")
    cancel.add_argument("--abort", action="store_true", help="stop its running jobs too (their tasks are put back "
                        "to open, nothing of them is pushed)")
    return parser


def memory_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="goldenloop memory",
        description="See and manage the project's memory: the task reflections (.openagents/memory/), "
        "the lessons the loop shows other tasks, and the rules every prompt carries.",
        epilog="exit codes: 0 done, 1 no such record, 2 usage or config error (a database that cannot be "
        "reached or used, or a memory file that is a folder or cannot be read, included)",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dir", type=Path, default=Path.cwd(), help="the project (default: here)")
    common.add_argument("--json", action="store_true", help="print JSON instead of text")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    kinds = ["attempt", "failed", "partial", "success", "decision"]
    listing = sub.add_parser("list", parents=[common], help="every reflection (attempt and task), newest first")
    listing.add_argument("--kind", choices=kinds, help="attempt reflections, or task reflections of one outcome")
    listing.add_argument("--agent", metavar="NAME")
    listing.add_argument("--archived", action="store_true", help="list the archive instead")
    listing.add_argument("--limit", type=_number(int, 1), default=20, metavar="N")
    sub.add_parser("show", parents=[common], help="one reflection, by its id or a unique start of it").add_argument("id")
    search = sub.add_parser("search", parents=[common],
                            help="lessons ranked as the loop ranks them, and attempt reflections alike")
    search.add_argument("text")
    search.add_argument("--kind", choices=kinds)
    search.add_argument("--limit", type=_number(int, 1), default=10, metavar="N")
    sub.add_parser("rules", parents=[common], help="the project's rules and the candidates")
    prune = sub.add_parser("prune", parents=[common], help="move old attempt reflections to the archive now")
    prune.add_argument("--older-than", type=_number(int, 0), metavar="DAYS",
                       help="default: reflexion.retentionDays")
    archive = sub.add_parser("archive", parents=[common],
                             help="move task reflections beyond the newest per agent to the archive now")
    archive.add_argument("--keep", type=_number(int, 0), metavar="N", help="default: memory.livePerAgent")
    export = sub.add_parser("export", parents=[common], help="every task reflection as JSON lines, or the markdown view")
    export.add_argument("--out", type=Path, metavar="FILE", help="write here instead of standard output")
    export.add_argument("--markdown", action="store_true", help="regenerate .openagents/memory/reflections/ instead")
    migrate = sub.add_parser("migrate", parents=[common],
                             help="copy the memory into a team's PostgreSQL or back into JSONL files (idempotent)")
    migrate.add_argument("--to", required=True, metavar="URL|jsonl",
                         help='a postgresql:// URL (a password in it is never printed), "env:VARIABLE" holding one, '
                              'or "jsonl" for .openagents/memory/')
    migrate.add_argument("--from", dest="source", metavar="URL|jsonl",
                         help="where to copy from (default: the store project.json names)")
    return parser


def history_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="goldenloop history",
        description="A task's improvement journey: each attempt's score, review, what it was asked to "
        "improve and what it cost, and the best version, from .openagents/history/.",
        epilog="exit codes: 0 done, 1 no history for the task or no such attempt, 2 usage",
    )
    parser.add_argument("task", metavar="TASK", help="the task id, e.g. T-12")
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="the project (default: here)")
    parser.add_argument("--subtask", metavar="ID", help="only this subtask's attempts")
    parser.add_argument("--patch", type=_number(int, 1), metavar="N",
                        help="print attempt N's tree as a patch against its base (for git apply)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    return parser


def serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="goldenloop serve",
        description="Serve the Reflect skill's REST API (docs/API.md). Environment: REFLECT_SKILL_ENABLED, "
        "REFLECT_DEFAULT_CRITERIA, REFLECT_SUCCESS_THRESHOLD, REFLECT_MAX_REFLECTIONS, REFLECT_TO_MEMORY, "
        "GOLDENLOOP_API_TOKEN.",
        epilog="exit codes: 0 stopped, 2 usage or config error (nothing was served), 130 interrupted",
    )
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1; any other needs GOLDENLOOP_API_TOKEN)")
    parser.add_argument("--port", type=_port, default=8765, help="port (default 8765; 0: any free one)")
    parser.add_argument("--root", type=Path, action="append", metavar="DIR",
                        help="projects must lie under this folder (repeatable; default: here)")
    parser.add_argument("--model", metavar="M", help="litellm model that judges reflections (default: heuristic only)")
    parser.add_argument("--max-body", type=_number(int, 1), default=1 << 20, metavar="BYTES",
                        help="largest request body accepted (default 1 MiB)")
    parser.add_argument("--read-timeout", type=_number(float, 0, above=True), default=30.0, metavar="SECONDS",
                        help="a client gets this long for a request's headers, and as long again for its body "
                             "(default 30)")
    return parser


BACKLOG_EXIT_CODES = "exit codes: 0 done, 1 not found or refused, 2 usage, 4 a run holds the repository"


def _priority(text: str) -> int:
    value = _number(int, 0)(text)
    if value > 4:
        raise argparse.ArgumentTypeError(f"must be a priority from 0 (most urgent) to 4, not {text}")
    return value


def _backlog_parser(name: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"goldenloop {name}", description=description, epilog=BACKLOG_EXIT_CODES)
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="the project (default: here)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    return parser


def init_parser() -> argparse.ArgumentParser:
    parser = _backlog_parser("init", "Make this folder a goldenloop project: .openagents/project.json with the "
                             "test and typecheck commands its files suggest, an empty backlog and a .gitignore.")
    parser.add_argument("--force", action="store_true", help="replace an existing project.json (the backlog stays)")
    return parser


def add_parser() -> argparse.ArgumentParser:
    parser = _backlog_parser("add", "Add a task to the backlog; prints its id.")
    parser.add_argument("title")
    parser.add_argument("--description", default="", metavar="TEXT")
    parser.add_argument("--priority", type=_priority, default=2, metavar="0-4", help="0 most urgent (default 2)")
    parser.add_argument("--deps", metavar="ID,...", help="tasks that must be closed first")
    parser.add_argument("--label", action="append", metavar="L", help="a label (repeatable)")
    parser.add_argument("--type", choices=["bug", "feature", "task", "chore"], default="task")
    return parser


def list_parser(name: str = "list") -> argparse.ArgumentParser:
    parser = _backlog_parser(name, "The backlog: ready tasks, blocked ones and why, those in progress, "
                             "and the last closed.")
    parser.add_argument("--all", action="store_true", help="every closed task, not only the last few")
    return parser


def show_parser() -> argparse.ArgumentParser:
    parser = _backlog_parser("show", "One task: its fields, subtasks and attempts, reflections and escalation.")
    parser.add_argument("id", metavar="ID")
    return parser


def reopen_parser(name: str = "reopen") -> argparse.ArgumentParser:
    parser = _backlog_parser(name, "Put a blocked or closed task back to open, for the next run.")
    parser.add_argument("id", metavar="ID")
    parser.add_argument("--forget", action="store_true", help="also delete its subtask state, to start afresh")
    return parser


def import_parser() -> argparse.ArgumentParser:
    parser = _backlog_parser("import", "Add tasks from a markdown checklist (- [ ] title; indented lines are the "
                             "description; checked items are skipped) or a JSON array of task objects.")
    parser.add_argument("file", type=Path, metavar="FILE")
    parser.add_argument("--dry-run", action="store_true", help="print what would be added, add nothing")
    return parser


def checks_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="goldenloop checks",
        description="The tests failing on the tree as it is, and the known failures you accept: a task closes "
        "only when its checks pass, apart from the tests listed in checks.knownFailures of project.json.",
        epilog="exit codes: 0 done, 1 refused (the failures are not all named tests, or a test to unwaive is not "
        "listed), 2 usage or config error, 4 a run holds the repository",
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dir", type=Path, default=Path.cwd(), help="the project (default: here)")
    common.add_argument("--json", action="store_true", help="print one JSON object instead of sentences")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    baseline = sub.add_parser("baseline", parents=[common], help="run the checks now and list the failing tests")
    baseline.add_argument("--waive", action="store_true", help="record every failing test as a known failure")
    baseline.add_argument("--reason", metavar="TEXT", help="why they may fail (kept with each waiver)")
    waive = sub.add_parser("waive", parents=[common], help="accept tests as known failures")
    waive.add_argument("tests", nargs="+", metavar="TEST", help="a test id, a file, or a glob over ids")
    waive.add_argument("--reason", metavar="TEXT", help="why they may fail (kept with each waiver)")
    unwaive = sub.add_parser("unwaive", parents=[common], help="take waivers back")
    unwaive.add_argument("tests", nargs="+", metavar="TEST", help="as written in checks.knownFailures")
    return parser


BACKLOG = "orchestrator.commands.backlog:run_backlog"
BACKLOG_COMMANDS = {
    "init": _lazy(init_parser, "orchestrator.commands.init_project:run_init"),
    "add": _lazy(add_parser, BACKLOG, "add"),
    "list": _lazy(list_parser, BACKLOG, "list"),
    "status": _lazy(lambda: list_parser("status"), BACKLOG, "status"),
    "show": _lazy(show_parser, BACKLOG, "show"),
    "reopen": _lazy(reopen_parser, BACKLOG, "reopen"),
    "retry": _lazy(lambda: reopen_parser("retry"), BACKLOG, "retry"),
    "import": _lazy(import_parser, BACKLOG, "import"),
}


do_one_task_main = _lazy(do_one_task_parser, "orchestrator.commands.do_one_task:do_one_task")
def doctor_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="goldenloop doctor",
        description="What this machine lets goldenloop guarantee, each tried for real: git, the sandbox that keeps "
        "an agent in its worktree, an agent ending with goldenloop; in a project, its agent program.",
        epilog="exit codes: 0 everything holds, 1 something does not (the line starting NO says what)",
    )
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="the project (default: here)")
    return parser


def report_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="goldenloop report",
        description="Write a run's morning report again (the latest run's by default) from what it left in "
        ".openagents/runs/, print its path, and with --open show it in your browser.",
        epilog="exit codes: 0 written, 1 no such run (or none has ended yet), 2 not a project or a broken project.json",
    )
    parser.add_argument("run", nargs="?", metavar="RUN", help="the run's id, as in .openagents/runs/ (default: latest)")
    parser.add_argument("--open", action="store_true", help="open the page in your browser")
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="the project (default: here)")
    return parser


OTHER_COMMANDS = {
    "report": _lazy(report_parser, "orchestrator.commands.report:run_report"),
    "doctor": _lazy(doctor_parser, "orchestrator.commands.doctor:run_doctor"),
    "memory": _lazy(memory_parser, "orchestrator.commands.memory:run_memory"),
    "history": _lazy(history_parser, "orchestrator.commands.history:run_history"),
    "checks": _lazy(checks_parser, "orchestrator.commands.checks:run_checks"),
    "serve": _lazy(serve_parser, "orchestrator.commands.serve:run_serve"),  # starlette and uvicorn only now
    "worker": _lazy(worker_parser, "orchestrator.commands.fleet:run_worker"),
    "enqueue": _lazy(enqueue_parser, "orchestrator.commands.fleet:run_enqueue"),
    "fleet": _lazy(fleet_parser, "orchestrator.commands.fleet:run_fleet"),
}


SUMMARY = """usage: goldenloop COMMAND [options]   (goldenloop help COMMAND, or COMMAND --help, for its options)

the golden loop:
  do-one-task   run the next ready task (or --task ID): decompose, execute, verify, commit
  overnight     work the backlogs of repositories until they or a budget run out
  history       a task's improvement journey: each attempt's score, review and cost
  report        a run's morning report (the latest by default); --open shows it
the backlog:
  init          make this folder a project: project.json, an empty backlog
  add           add a task
  import        add tasks from a markdown checklist or a JSON array
  list, status  ready, blocked and running tasks, and the last closed
  show          one task in full: subtasks, attempts, reflections, escalation
  reopen, retry put a blocked or closed task back to open
  checks        the tests failing now (baseline), and the known failures you waive
  doctor        what this machine lets goldenloop guarantee: the agent's sandbox, tried
memory and the reflect API:
  memory        reflections, lessons and rules: list, show, search, rules, prune, archive, export, migrate
  serve         the reflect API (docs/API.md)
a fleet of workers on PostgreSQL (docs/FLEET.md):
  worker        work the fleet's queue, one task at a time
  enqueue       put the ready tasks of repositories on the queue, as one run with one budget
  fleet         a run's status, its report, cancelling it"""


def main(argv: list[str] | None = None) -> int:
    """`goldenloop COMMAND ...`: every command above by name (SUMMARY)."""
    argv = sys.argv[1:] if argv is None else argv
    commands = {"do-one-task": do_one_task_main, "overnight": overnight_main, **OTHER_COMMANDS, **BACKLOG_COMMANDS}
    if argv[:1] == ["--version"]:
        print(f"goldenloop {version()}")
        return 0
    if argv[:1] == ["help"]:  # `goldenloop help [COMMAND]`
        argv = [argv[1], "--help"] if len(argv) > 1 else ["--help"]
    if not argv or argv[0] not in commands:
        asked = bool(argv) and argv[0] in ("-h", "--help")
        if argv and not asked:
            print(f"goldenloop: unknown command {argv[0]!r}", file=sys.stderr)
        print(SUMMARY, file=sys.stdout if asked else sys.stderr)
        return 0 if asked else 2
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
