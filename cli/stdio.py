"""The standard streams of a `pfs` process: stand-ins for closed ones, and flushing
stdout so that a failed write is one error line and a non-zero exit, never an abort."""

from __future__ import annotations

import fcntl
import os
import sys


def open_standard_descriptors() -> None:
    """Give a closed stdin, stdout or stderr a stand-in before anything opens a descriptor.

    Otherwise the event loop's own descriptors land on 0-2, and libuv aborts the
    process when it closes one of them. The stand-ins keep the streams closed in
    effect: stdout is /dev/null opened for reading, so writing to it fails (EBADF) as
    writing to a closed stdout does; stdin is opened for writing, so reading it fails;
    a closed stderr swallows the error messages, the exit status still tells.
    """
    for fd, flags in ((0, os.O_WRONLY), (1, os.O_RDONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
        except OSError:
            stand_in = os.open(os.devnull, flags)
            if stand_in != fd:
                os.dup2(stand_in, fd)
                os.close(stand_in)
    # Python left these None; print() to a None stdout would drop the output silently
    # and an error printed to a None stderr would go to stdout. stdin stays None: `put -`
    # says that it is closed.
    if sys.stdout is None:
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - lives as long as the process
    if sys.stderr is None:
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115


def flush_stdout(command: str) -> bool:
    """Flush what is left for stdout; on failure say so (except for a closed pipe, which
    ends output the usual way) and drop it, so that the interpreter's own flush at exit
    does not fail again. Returns True if everything was written."""
    try:
        sys.stdout.flush()
    except OSError as exc:
        if not isinstance(exc, BrokenPipeError):
            print(f"pfs: {command}standard output: {exc.strerror or exc}", file=sys.stderr)
        discard_stdout()
        return False
    return True


def discard_stdout() -> None:
    """Point descriptor 1 at /dev/null: output still buffered goes nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)


def stdout_works() -> bool:
    """False if stdout is closed (its stand-in is open for reading only) or cannot take
    what is buffered for it: then a write error without a file name was stdout's."""
    try:
        if fcntl.fcntl(1, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
            return False
        sys.stdout.flush()
    except OSError:
        return False
    return True
