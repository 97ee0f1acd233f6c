"""The tools and APIs a text names: seed 001's second relevance criterion.

"Same tool or API (e.g., reflections mentioning a specific API endpoint)": a lesson about
the Stripe webhook endpoint helps a task about that endpoint even when the two share no
other word, and one shared ordinary word ("release") is no such evidence. `tools_named`
reads, offline and without a model:

- endpoints: `POST /api/v1/orders/{id}`, `/api/...` and `/v2/...` paths, ids made generic
  (`endpoint:/api/v1/orders/{}`);
- libraries and commands: `import x`, `from x import`, `require("x")`, `pip install x`,
  `npm install x`, `x.call(`, and the first word of a code span (`` `pytest -k` ``);
- services, libraries and commands by name from a known list (OAuth, Stripe, S3,
  PostgreSQL, pytest, kubectl...), spellings folded (`postgres`, `psql` -> `postgresql`).

Each is a lowercase key; the order is first mention, each once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["tool_overlap", "tools_named"]

MAX_TOOLS = 24

# Names that are no ordinary English word: found anywhere as a word.
_KNOWN = """
oauth oauth2 oidc saml jwt openid sso ldap kerberos
stripe paypal braintree twilio sendgrid mailgun slack discord telegram github gitlab bitbucket jira
aws s3 ec2 lambda dynamodb sqs sns cloudfront iam gcp bigquery firestore firebase azure cosmosdb
postgres postgresql psql mysql mariadb sqlite sqlite3 mongodb mongo redis memcached elasticsearch
opensearch kafka rabbitmq nats celery cassandra clickhouse snowflake supabase prisma sqlalchemy alembic
graphql grpc protobuf websocket websockets webhook webhooks openapi swagger soap
docker dockerfile kubernetes k8s kubectl helm terraform ansible nginx apache caddy systemd cron crontab
pytest unittest tox nox mypy pyright ruff flake8 pylint black isort jest vitest mocha cypress playwright
selenium puppeteer eslint prettier tsc webpack vite rollup esbuild babel
npm pnpm yarn pip pipx poetry uv conda cargo rustc gradle maven mvn dotnet nuget composer bundler
django flask fastapi starlette uvicorn gunicorn pydantic pandas numpy scipy matplotlib httpx aiohttp
urllib3 boto3 botocore beautifulsoup bs4 lxml scrapy pyyaml jinja2 asyncio anyio trio litellm openai
anthropic langchain react nextjs vue nuxt angular svelte tailwind nodejs deno bun typescript
rails laravel spring springboot hibernate
git curl wget ssh rsync ffmpeg imagemagick pandoc latex
smtp imap http https ftp sftp dns tls ssl cors csrf
"""
# Ordinary words as well as names: counted only where the text shows they are code.
_AMBIGUOUS = {"make", "go", "rest", "express", "click", "rich", "requests", "node", "spark", "flask", "lambda",
              "black", "bun", "deno", "vue", "rails", "spring", "celery", "trio", "uv"}
_ALIASES = {
    "postgres": "postgresql", "psql": "postgresql", "pg": "postgresql", "oauth2": "oauth", "k8s": "kubernetes",
    "kubectl": "kubernetes", "mongo": "mongodb", "sqlite3": "sqlite", "websockets": "websocket",
    "webhooks": "webhook", "swagger": "openapi", "mvn": "maven", "bs4": "beautifulsoup", "nodejs": "node",
    "https": "http", "ssl": "tls", "dockerfile": "docker", "crontab": "cron", "springboot": "spring",
}
_WORDS = frozenset(_KNOWN.split()) - _AMBIGUOUS

_METHOD_PATH = re.compile(r"\b(?:GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS)\s+(/[\w/{}:.<>-]*)")
_API_PATH = re.compile(r"(?<![\w./-])(/(?:api|v\d+|graphql|oauth2?|webhooks?)(?:/[\w{}:.<>-]+)*)/?", re.IGNORECASE)
_IMPORT = re.compile(
    r"(?:^|\n|;)\s*(?:from\s+([A-Za-z_][\w.]*)\s+import|import\s+([A-Za-z_][\w.]*))"
    r"|require\(\s*['\"]([@\w./-]+)['\"]\s*\)"
    r"|\b(?:pip|pip3|uv pip|poetry|npm|pnpm|yarn|cargo|gem|go)\s+(?:install|add|get)\s+(?:-\S+\s+)*([@\w./-]+)"
)
_DOTTED_CALL = re.compile(r"(?<![\w.])([A-Za-z_][A-Za-z0-9_]{1,30})\.[A-Za-z_]\w*\(")
_CODE_SPAN = re.compile(r"`([^`\n]{1,120})`")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9+#-]*[A-Za-z0-9]|[A-Za-z]")
_NOT_MODULES = {"self", "cls", "this", "super", "os", "re", "sys", "str", "list", "dict", "set", "math", "json",
                "path", "pathlib", "typing", "e", "i", "x", "it", "np", "pd", "obj", "item", "result", "data"}
_ID_SEGMENT = re.compile(r"^(?:\d+|[0-9a-f]{8,}|:[\w]+|<[\w:]+>|\{[\w]*\})$", re.IGNORECASE)


def tools_named(text: str) -> tuple[str, ...]:
    """The tools and APIs `text` names, as lowercase keys (see the module docstring)."""
    found: dict[str, None] = {}
    for key in (*_endpoints(text), *_imported(text), *_code_words(text), *_known_words(text)):
        found.setdefault(key, None)
        if len(found) >= MAX_TOOLS:
            break
    return tuple(found)


def tool_overlap(lesson_tools: Iterable[str], query_tools: Iterable[str]) -> float:
    """1.0 when a lesson names one of the query's tools or endpoints (two or more of
    several are no stronger: one shared API is the evidence), else 0.0."""
    return 1.0 if set(lesson_tools) & set(query_tools) else 0.0


def _endpoints(text: str) -> list[str]:
    paths = [m.group(1) for m in _METHOD_PATH.finditer(text)] + [m.group(1) for m in _API_PATH.finditer(text)]
    return [f"endpoint:{_generic_path(path)}" for path in paths if len(path) > 1]


def _generic_path(path: str) -> str:
    """`/api/v1/Orders/42/` -> `/api/v1/orders/{}`: one endpoint however its ids are written."""
    segments = [s for s in path.strip("/").split("/") if s]
    return "/" + "/".join("{}" if _ID_SEGMENT.match(s) else s.lower() for s in segments)


def _imported(text: str) -> list[str]:
    names = [next(g for g in m.groups() if g) for m in _IMPORT.finditer(text)]
    found = [_fold(_root(name)) for name in names if _root(name)]
    calls = (m.group(1).lower() for m in _DOTTED_CALL.finditer(text))  # `requests.get(`: a known name only
    return found + [_fold(name) for name in calls if name in _WORDS or name in _AMBIGUOUS]


def _root(name: str) -> str:
    """A package's name: `@org/pkg` -> `@org/pkg`, `boto3.session` -> `boto3`."""
    name = name.strip().strip(".")
    if name.startswith("@"):
        return name.lower()
    return name.split(".")[0].split("/")[0].lower() if name.split(".")[0].lower() not in _NOT_MODULES else ""


def _code_words(text: str) -> list[str]:
    """The program a code span starts (`` `pytest -k slow` `` -> pytest), ambiguous names included."""
    found = []
    for span in _CODE_SPAN.findall(text):
        first = span.strip().split(" ")[0].lower()
        if first in _WORDS or first in _AMBIGUOUS or first in _ALIASES:
            found.append(_fold(first))
    return found


def _known_words(text: str) -> list[str]:
    return [_fold(word) for word in (w.lower() for w in _WORD.findall(text)) if word in _WORDS]


def _fold(name: str) -> str:
    return _ALIASES.get(name, name)
