"""goldenloop's Reflexion memory: failure digests, verbal reflections and their store.

Usable on its own; it never imports the orchestrator.
"""
