"""Keep a real agent on this machine: what it would send anywhere but 127.0.0.1 goes to a
proxy that is not there, so a test never depends on (or talks to) the internet."""

from __future__ import annotations

import socket

import pytest

PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy")


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every request to another host goes to a closed loopback port and fails at once;
    loopback itself (the model server) is reached directly."""
    proxy = f"http://127.0.0.1:{closed_port()}"
    for name in PROXY_VARIABLES:
        monkeypatch.setenv(name, proxy)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.setenv(name, "127.0.0.1,localhost")
