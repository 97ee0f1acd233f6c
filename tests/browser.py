"""A real headless Chromium, driven over its DevTools pipe, for tests of pages users open.

Chromium's `--remote-debugging-pipe` reads DevTools commands on its fd 3 and answers on
fd 4, one JSON message each, ended by a NUL byte: no websocket library and no driver
download, only the browser (Debian: `apt-get install chromium`). `open_page` loads a
file; `evaluate` runs JavaScript in it; `problems` lists what the page logged as an error
or threw, as a user's console would show it.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

WAIT_S = 120.0  # for one answer; generous, as a busy machine needs, and never asserted
INSTALL = "apt-get install chromium (Debian, under a minute) or put chromium on PATH"


def chromium() -> str:
    """The browser's program, or the test is skipped saying how to install it."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(f"no Chromium to open the report in: {INSTALL}")


class Browser:
    def __init__(self, home: Path) -> None:
        commands_in, self._commands = os.pipe()
        self._answers, answers_out = os.pipe()
        home.mkdir(parents=True, exist_ok=True)
        argv = [chromium(), "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage",  # a container's /dev/shm is often too small for it
                "--no-first-run", "--disable-extensions", "--disable-background-networking",
                f"--user-data-dir={home / 'profile'}", "about:blank"]
        # A small Python puts the pipes where Chromium looks for them, fds 3 and 4, then
        # becomes Chromium (a shell cannot name fds above 9).
        plumb = (f"import os, sys; os.dup2({commands_in}, 3); os.dup2({answers_out}, 4); "
                 "os.execv(sys.argv[1], sys.argv[1:])")
        self._process = subprocess.Popen([sys.executable, "-c", plumb, *argv], pass_fds=(commands_in, answers_out),
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         env={**os.environ, "HOME": str(home)})
        os.close(commands_in)
        os.close(answers_out)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self._session = ""

    def close(self) -> None:
        self._process.kill()
        self._process.wait()
        os.close(self._commands)
        os.close(self._answers)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, method: str, session: bool = True, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session and self._session:
            message["sessionId"] = self._session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._read()
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self.events.append(answer)

    def open_page(self, page: Path) -> None:
        try:
            target = self.call("Target.createTarget", session=False, url="about:blank")["targetId"]
        except RuntimeError as exc:  # the browser itself cannot run on this machine: nothing of ours to test
            pytest.skip(f"Chromium did not start here ({exc}); {INSTALL}")
        self._session = self.call("Target.attachToTarget", session=False, targetId=target, flatten=True)["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.call(f"{domain}.enable")
        self.call("Page.navigate", url=page.as_uri())
        self.wait_for("Page.loadEventFired")

    def wait_for(self, method: str) -> dict[str, Any]:
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._read())
        return next(e for e in self.events if e.get("method") == method)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries of the page so far."""
        found = []
        for e in self.events:
            method, params = e.get("method"), e.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(str(params.get("exceptionDetails", {}).get("text")))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(str(params.get("args")))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                found.append(str(params["entry"].get("text")))
        return found

    def screenshot(self, path: Path) -> None:
        import base64

        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png",
                                                    captureBeyondViewport=True)["data"]))

    def _read(self) -> dict[str, Any]:
        deadline = time.monotonic() + WAIT_S
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._answers], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(self._answers, 1 << 16) if ready else b""
            if not chunk:
                raise RuntimeError(f"Chromium said nothing more (exit code {self._process.poll()})")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)
