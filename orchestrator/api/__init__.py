"""The REST API of `goldenloop serve`: the Reflect skill over HTTP (docs/API.md).

Nothing here is imported unless `serve` runs, so the command line stays free of
Starlette and uvicorn; `app.create_app` is the entry point.
"""
