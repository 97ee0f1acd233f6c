"""The backlog benchmark: does the memory lift the tasks after a project's pitfall is met?"""
