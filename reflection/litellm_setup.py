"""litellm, imported once, late, offline and without reading `.env`; and the name of the
scripted provider goldenloop registers in it.

Importing litellm costs seconds and a hundred MiB (3 to 25 s on a loaded machine), so
nothing imports it at start-up: `load_litellm()` is called by the code that is about to
make a model call (`reflection.llm.preload_litellm` starts it in a background thread as
soon as a run knows a model will be called). A model call's timeout starts only once the
import is done (`reflection.llm.LiteLLMModel.ready`): the import is not the model's
slowness.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Awaitable, Callable, Iterator
from types import ModuleType
from typing import TypeVar

SCRIPTED_PROVIDER = "scripted"
SCRIPTED_PREFIX = f"{SCRIPTED_PROVIDER}/"


T = TypeVar("T")
_module: ModuleType | None = None
_import_lock = threading.Lock()
# litellm keeps process-wide state bound to the event loop it last ran on (its logging
# worker's queue and task): calls from two loops would strand each other's tasks. A run
# whose workers have event loops of their own names one home loop for every call.
_home: asyncio.AbstractEventLoop | None = None


@contextlib.contextmanager
def _dotenv_disabled() -> Iterator[None]:
    """Switch python-dotenv off for the duration of the `import litellm`.

    litellm's `__init__` calls `dotenv.load_dotenv()` when LITELLM_MODE is unset or
    "DEV"; python-dotenv then looks for `.env` in the current folder (when run as
    `python -c` or from a REPL) or in the folders above litellm's install. Either way,
    a user's or a target repository's secrets would silently become environment
    variables. LITELLM_MODE=PRODUCTION (our default) skips that call; PYTHON_DOTENV_DISABLED
    covers a user who set LITELLM_MODE=DEV. It is set only then, and restored afterwards, so
    the user's own use of python-dotenv is unaffected, and so is a command started while a
    background import runs (`preload_litellm`) in the usual case.
    """
    if "PYTHON_DOTENV_DISABLED" in os.environ or os.environ.get("LITELLM_MODE", "DEV") != "DEV":
        yield
        return
    os.environ["PYTHON_DOTENV_DISABLED"] = "1"
    try:
        yield
    finally:
        os.environ.pop("PYTHON_DOTENV_DISABLED", None)


def load_litellm() -> ModuleType:
    """Import litellm once, offline and without reading `.env`."""
    global _module
    with _import_lock:
        if _module is None:
            # The bundled price list instead of a download from GitHub at import time.
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
            with _dotenv_disabled():
                import litellm
            # Otherwise litellm prints "Give Feedback / Get Help" banners on every error.
            litellm.suppress_debug_info = True
            _module = litellm
        return _module


@contextlib.contextmanager
def litellm_home(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """While the block runs, litellm calls made on any other event loop run on `loop`."""
    global _home
    previous, _home = _home, loop
    try:
        yield
    finally:
        _home = previous


async def on_home_loop(call: Callable[[], Awaitable[T]]) -> T:
    """`call()` awaited on the home loop when one is named and is not this one; cancelling
    the caller cancels it there."""
    home = _home
    if home is None or home.is_closed() or home is asyncio.get_running_loop():
        return await call()

    async def run() -> T:
        return await call()

    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(run(), home))
