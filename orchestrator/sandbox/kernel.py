"""The few Linux calls the sandbox makes that the os module lacks, through ctypes.

`prctl` and three raw system calls: a failure raises OSError with the errno, as os does.
Loading the C library is deferred to the first call, so importing this costs only ctypes.
"""

from __future__ import annotations

import ctypes
import os
from functools import cache

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38


@cache
def libc() -> ctypes.CDLL:
    """The process's C library (raises OSError where there is none to load, e.g. Windows)."""
    library = ctypes.CDLL(None, use_errno=True)
    library.syscall.restype = ctypes.c_long
    return library


def _checked(result: int) -> int:
    if result < 0:
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number))
    return result


def syscall(number: int, *args: object) -> int:
    """A raw system call by number; its arguments must already be ctypes values."""
    return _checked(libc().syscall(ctypes.c_long(number), *args))


def prctl(option: int, value: int) -> None:
    ulong = ctypes.c_ulong
    _checked(libc().prctl(ctypes.c_int(option), ulong(value), ulong(0), ulong(0), ulong(0)))
