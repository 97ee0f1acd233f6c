"""A project's own redaction settings: its domains, its extra patterns, the names it keeps.

`redact` knows secrets and personal data by their form; what only the project knows is
said in project.json's `redaction` section and held here as a `RedactionPolicy`:

- `ownDomains`: every host under one of them (`ci.acme-corp.com`, `db01.prod.acme-corp.com`)
  is an internal host, whatever its labels say;
- `extraPatterns`: kind -> regular expression, for identifiers of the project's own
  (`EMP-\\d{6}`); a match (its group `secret`, if it names one) becomes `[REDACTED:<kind>]`;
- `keepNames`: people's (or bots') names that may stand in what is written, such as the
  maintainer a README names.

The policy in force is a context variable, as the run's known secret values are: a run
sets it from its config as it opens (`policy_in_force`), the reflect API around each
request for the project asked about, so every `redact` call on the way (records, pages,
lessons, notes, prompts) applies it without being handed it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

__all__ = ["RedactionPolicy", "current_policy", "domain_problem", "pattern_problem", "policy_in_force"]

_DOMAIN = re.compile(r"(?i)(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z][a-z0-9-]*[a-z0-9]")
_KIND = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,39}")


def domain_problem(domain: str) -> str | None:
    """Why `domain` cannot be one of ownDomains, or None."""
    if not _DOMAIN.fullmatch(domain):
        return f"{domain!r} is not a domain name such as acme-corp.com"
    return None


def pattern_problem(kind: str, pattern: str) -> str | None:
    """Why `kind: pattern` cannot be one of extraPatterns, or None."""
    if not _KIND.fullmatch(kind):
        return f"{kind!r} is not a kind name (letters, digits and _, starting with a letter)"
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        return f"the pattern of {kind} is not a regular expression: {exc}"
    if compiled.fullmatch(""):
        return f"the pattern of {kind} matches the empty text, so it would mark every position"
    return None


@dataclass(frozen=True)
class RedactionPolicy:
    """What a project adds to redaction (see the module's docstring)."""

    own_domains: tuple[str, ...] = ()
    extra_patterns: Mapping[str, str] = field(default_factory=dict)
    keep_names: frozenset[str] = frozenset()

    @classmethod
    def of(cls, own_domains: Iterable[str] = (), extra_patterns: Mapping[str, str] | None = None,
           keep_names: Iterable[str] = ()) -> RedactionPolicy:
        return cls(tuple(d.lower().strip(".") for d in own_domains), dict(extra_patterns or {}),
                   frozenset(" ".join(name.split()).casefold() for name in keep_names))

    def __bool__(self) -> bool:
        return bool(self.own_domains or self.extra_patterns or self.keep_names)

    def keeps(self, name: str) -> bool:
        """Whether `name` is one the project lets stand."""
        return " ".join(name.split()).casefold() in self.keep_names

    def owns(self, host: str) -> bool:
        """Whether `host` is one of the own domains or under one."""
        host = host.lower()
        return any(host == domain or host.endswith("." + domain) for domain in self.own_domains)

    @functools.cached_property
    def extra(self) -> list[tuple[str, re.Pattern[str]]]:
        """(kind, compiled pattern) of the extra patterns."""
        return [(kind, re.compile(pattern)) for kind, pattern in self.extra_patterns.items()]


_POLICY: ContextVar[RedactionPolicy | None] = ContextVar("redaction_policy", default=None)


def current_policy() -> RedactionPolicy | None:
    """The policy every `redact` in this context applies; None: the built-in rules only."""
    return _POLICY.get()


@contextmanager
def policy_in_force(policy: RedactionPolicy | None) -> Iterator[RedactionPolicy | None]:
    """`policy` applied by every `redact` in this context (and the tasks and threads it starts)."""
    token = _POLICY.set(policy or None)
    try:
        yield policy
    finally:
        try:
            _POLICY.reset(token)
        except ValueError:  # closed in another context than it was opened in
            _POLICY.set(None)
