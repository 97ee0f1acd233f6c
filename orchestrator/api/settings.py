"""What the API server is told: the Reflect skill's environment, the roots, the limits.

Every setting is read and checked once, at start; a bad value is an `ApiConfigError`
worded as one sentence, which `goldenloop serve` prints before exiting with 2.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from reflection.llm import ChatModel
from reflection.pattern.criteria import REVIEW_CRITERIA, QualityCriterion, criteria_named
from reflection.reflect_history import DEFAULT_MAX_PER_SESSION
from reflection.reflect_skill import HEURISTIC_CRITERIA

DEFAULT_MAX_BODY = 1 << 20  # 1 MiB: a long conversation, far from a memory problem
DEFAULT_READ_TIMEOUT = 30.0  # seconds for a request's headers, and again for its body
DEFAULT_THRESHOLD = 0.8
TOKEN_ENV = "GOLDENLOOP_API_TOKEN"
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}
_CRITERION_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")


class ApiConfigError(Exception):
    """A setting that cannot be used, as one sentence."""


@dataclass(frozen=True)
class ReflectConfig:
    """The seed's REFLECT_* variables, checked."""

    enabled: bool = True
    criteria: tuple[QualityCriterion, ...] = REVIEW_CRITERIA
    threshold: float = DEFAULT_THRESHOLD
    max_reflections: int = DEFAULT_MAX_PER_SESSION
    to_memory: bool = True  # each reflection also leaves a lesson in the project's memory


@dataclass(frozen=True)
class ApiSettings:
    """Everything the app needs; `roots` are resolved folders."""

    roots: tuple[Path, ...]
    reflect: ReflectConfig = field(default_factory=ReflectConfig)
    token: str | None = None
    max_body: int = DEFAULT_MAX_BODY
    read_timeout: float = DEFAULT_READ_TIMEOUT
    model: ChatModel | None = None


def reflect_config_from_env(env: Mapping[str, str], *, with_model: bool) -> ReflectConfig:
    """The REFLECT_* variables; unset ones keep the seed's defaults."""
    return ReflectConfig(
        enabled=_flag(env, "REFLECT_SKILL_ENABLED", True),
        criteria=_criteria(env.get("REFLECT_DEFAULT_CRITERIA"), with_model),
        threshold=_threshold(env.get("REFLECT_SUCCESS_THRESHOLD")),
        max_reflections=_at_least_one(env.get("REFLECT_MAX_REFLECTIONS")),
        to_memory=_flag(env, "REFLECT_TO_MEMORY", True),
    )


def token_from_env(env: Mapping[str, str]) -> str | None:
    """The bearer token; an empty variable counts as none."""
    token = (env.get(TOKEN_ENV) or "").strip()
    return token or None


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    value = raw.strip().lower()
    if value in _TRUE | _FALSE:
        return value in _TRUE
    raise ApiConfigError(f"{name} must be true or false, not {raw!r}")


def _criteria(raw: str | None, with_model: bool) -> tuple[QualityCriterion, ...]:
    if raw is None or not raw.strip():
        return REVIEW_CRITERIA
    names = [name.strip() for name in raw.split(",") if name.strip()]
    bad = [name for name in names if not _CRITERION_NAME.fullmatch(name)]
    if bad or not names:
        raise ApiConfigError(f"REFLECT_DEFAULT_CRITERIA must be comma-separated snake_case names, not {raw!r}")
    unscorable = [name for name in names if name not in HEURISTIC_CRITERIA]
    if unscorable and not with_model:  # without a model a typo would silently score 0.5
        known = ", ".join(sorted(HEURISTIC_CRITERIA))
        raise ApiConfigError(f"REFLECT_DEFAULT_CRITERIA names {unscorable[0]!r}, which only a model can score: "
                             f"pass --model or use {known}")
    return criteria_named(dict.fromkeys(names))


def _threshold(raw: str | None) -> float:
    if raw is None or not raw.strip():
        return DEFAULT_THRESHOLD
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0.0 <= value <= 1.0:  # also refuses nan
        raise ApiConfigError(f"REFLECT_SUCCESS_THRESHOLD must be a number from 0 to 1, not {raw!r}")
    return value


def _at_least_one(raw: str | None) -> int:
    if raw is None or not raw.strip():
        return DEFAULT_MAX_PER_SESSION
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise ApiConfigError(f"REFLECT_MAX_REFLECTIONS must be a whole number of 1 or more, not {raw!r}")
    return value


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the server on this machine."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


def check_exposure(host: str, token: str | None) -> None:
    """A server reachable from other machines must ask for a token."""
    if token is None and not is_loopback(host):
        raise ApiConfigError(f"binding {host} makes the API reachable from other machines; "
                             f"set {TOKEN_ENV} so every request must carry it, or bind 127.0.0.1")


def resolved_roots(folders: list[Path]) -> tuple[Path, ...]:
    """The `--root` folders, resolved; each must exist."""
    roots = []
    for folder in folders:
        resolved = folder.expanduser().resolve()
        if not resolved.is_dir():
            raise ApiConfigError(f"--root {folder} is not a folder")
        roots.append(resolved)
    return tuple(dict.fromkeys(roots))
