"""Writes allowed only beneath given paths, enforced by the kernel (Linux Landlock).

Landlock lets an unprivileged process give up rights, for itself and for everything it
starts afterwards; nothing can take the restriction back. A ruleset names the kinds of
access it handles (here every way to change the file system: write, truncate, create,
remove, rename or link), and each rule allows some of them beneath one directory, or on
one file. A rule holds an inode, not a path string: the path is opened once, when the rule
is added. So a grant on a worktree covers what lies beneath that directory, by whatever
path it is reached, and never what a symlink inside it points to: a `.venv` linked into the
worktree from the user's checkout stays read-only. Reading and executing are not handled,
so the ordinary permissions alone decide them.

Three system calls and a prctl through ctypes rather than a package: the calls are stable
kernel ABI (numbered alike on x86_64 and aarch64), and the Python bindings on offer are
compiled dependencies or little maintained, for what takes a page here.

What older kernels miss: before ABI 2 (Linux 5.19) a file cannot be moved or linked into
another folder even within the grant (EXDEV: `mv` and `shutil.move` then copy); before
ABI 3 (Linux 6.2) truncate(2) is not restricted. Landlock never restricts chmod, chown,
utimes or extended attributes.

The restriction binds the calling thread and what it starts later: call `restrict_writes`
in a process with one thread (the sandbox's wrapper does, before starting the command).
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import sys
from functools import cache
from typing import TYPE_CHECKING

from orchestrator.sandbox import kernel

if TYPE_CHECKING:  # pathlib is not imported at run time: the wrapper starts before every command
    from collections.abc import Iterable
    from pathlib import Path

CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1

WRITE_FILE = 1 << 1
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2: link or rename a file into another directory
TRUNCATE = 1 << 14  # ABI 3
FILE_RIGHTS = WRITE_FILE | TRUNCATE  # the only rights a rule on a non-directory may hold

# Writable whatever the grant: shells redirect to /dev/null, programs read and write
# terminals, and POSIX shared memory and semaphores live in /dev/shm.
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
           "/dev/ptmx", "/dev/pts", "/dev/shm")


class SandboxError(OSError):
    """Writes could not be restricted; the message is one sentence saying why."""


class _RulesetAttr(ctypes.Structure):
    # The kernel accepts this prefix of the struct; the network and scope fields after it
    # (ABI 4 and 6) stay unhandled.
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # packed in the kernel's header: 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


@cache
def _probe() -> tuple[int, str | None]:
    """(ABI version, None) or (0, why there is none)."""
    if not sys.platform.startswith("linux"):
        return 0, "Landlock works on Linux only"
    try:
        version = kernel.syscall(CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    except OSError as error:
        return 0, _why(error.errno)
    except AttributeError:  # a C library without syscall()
        return 0, "this system's C library offers no way to call Landlock"
    return version, None


def _why(number: int | None) -> str:
    if number == errno.ENOSYS:
        return "this kernel has no Landlock (Linux 5.13 or later with Landlock enabled is needed)"
    if number == errno.EOPNOTSUPP:
        return "Landlock is built into this kernel but disabled at boot (it must be listed in lsm=)"
    return (f"the Landlock system call is refused here ({os.strerror(number or 0)}), "
            "probably by a seccomp filter such as a container's")


def abi() -> int:
    """The kernel's Landlock ABI version; 0 where Landlock cannot be used."""
    return _probe()[0]


def unavailable_reason() -> str | None:
    """One sentence saying why writes cannot be restricted here; None when they can."""
    return _probe()[1]


def write_rights(version: int) -> int:
    """Every right that changes the file system, as far as ABI `version` knows them."""
    rights = (WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK
              | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM)
    if version >= 2:
        rights |= REFER
    if version >= 3:
        rights |= TRUNCATE
    return rights


def restrict_writes(paths: Iterable[Path | str]) -> None:
    """From now on this thread and what it starts may change files only beneath `paths`
    (and the devices in DEVICES). Paths that do not exist are skipped."""
    version = abi()
    if not version:
        raise SandboxError(f"cannot restrict writes: {unavailable_reason()}")
    handled = write_rights(version)
    attr = _RulesetAttr(handled)
    ruleset = _step("create a Landlock ruleset", CREATE_RULESET, ctypes.byref(attr),
                    ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0))
    try:
        for path in (*paths, *DEVICES):
            _allow(ruleset, path, handled)
        try:  # without it an unprivileged process may not restrict itself
            kernel.prctl(kernel.PR_SET_NO_NEW_PRIVS, 1)
        except OSError as error:
            raise SandboxError(f"cannot set no_new_privs: {error.strerror}") from error
        _step("enforce the Landlock ruleset", RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


def _allow(ruleset: int, path: Path | str, rights: int) -> None:
    """Allow `rights` beneath `path`, symlinks resolved first (the rule binds their target)."""
    try:
        fd = os.open(os.path.realpath(path), os.O_PATH | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return  # nothing there to write to
    except OSError as error:
        raise SandboxError(f"cannot grant writing beneath {path}: {error.strerror}") from error
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FILE_RIGHTS
        rule = _PathBeneathAttr(rights, fd)
        _step(f"grant writing beneath {path}", ADD_RULE, ctypes.c_int(ruleset),
              ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0))
    finally:
        os.close(fd)


def _step(what: str, number: int, *args: object) -> int:
    try:
        return kernel.syscall(number, *args)
    except OSError as error:
        raise SandboxError(f"cannot {what}: {error.strerror}") from error
