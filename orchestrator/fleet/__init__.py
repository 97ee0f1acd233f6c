"""A fleet of workers: the backlogs of many repositories worked by many machines at once.

`goldenloop enqueue` puts each repository's ready tasks on a job queue in PostgreSQL
(Procrastinate); `goldenloop worker`, on any number of machines, takes one job at a time,
runs the golden loop on that task in a worktree of its own and integrates the result
into the repository's base branch. One budget, one morning report, for the whole fleet.
Optional: it needs the `postgres` extra, and nothing here is imported by a local run.
docs/FLEET.md says how a team sets it up.
"""

# Nothing is exported: the fleet is reached through its commands (orchestrator/commands/fleet.py).
__all__: list[str] = []
