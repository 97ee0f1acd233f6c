"""PostgreSQL for a team: the reflection store and lesson ranking on a shared database.

Optional: it needs the `postgres` extra (`pip install 'goldenloop[postgres]'`), and nothing
here is imported unless `memory.store` names a `postgresql://` URL. `connection` holds
what the memory and the fleet (orchestrator/fleet) share: URLs that never show a
password, connections that survive a server restart, schemas applied once.
"""
