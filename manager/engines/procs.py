"""Process helpers for engines: run a child with signals forwarded and a timeout."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: see manager.record
if TYPE_CHECKING:
    from collections.abc import Callable
    from collections.abc import Iterator

    from manager.engines.base import Streams

PR_SET_PDEATHSIG = 1
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
GRACE_SECONDS = 2.0
TIMEOUT_STATUS = 124


def _stat_fields(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/PID/stat (after the command name, which may hold spaces)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            data = f.read()
    except OSError:
        return None
    return data[data.rindex(")") + 2:].split()


def start_time(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat: with the pid, it tells a process from a reused pid."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def state(pid: int) -> str | None:
    """Field 3 of /proc/PID/stat (R, S, Z ...); None when the process is gone."""
    fields = _stat_fields(pid)
    return fields[0] if fields else None


def parent_of(pid: int) -> int | None:
    """Field 4 of /proc/PID/stat; None when the process is gone."""
    fields = _stat_fields(pid)
    return int(fields[1]) if fields else None


def is_zombie(pid: int) -> bool:
    """Gone, or dead and not yet reaped."""
    fields = _stat_fields(pid)
    return fields is None or fields[0] == "Z"


def die_with_parent() -> Callable[[], None]:
    """A preexec_fn: the child gets SIGKILL when this process dies, even by SIGKILL.

    ctypes is imported here, in the parent (only commands that run something need it;
    nothing should be imported between fork and exec)."""
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

    return preexec


def children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as f:
                found.extend(int(p) for p in f.read().split())
        except OSError:
            continue
    return found


def descendants(pid: int) -> list[int]:
    result: list[int] = []
    stack = [pid]
    while stack:
        for child in children(stack.pop()):
            result.append(child)
            stack.append(child)
    return result


def signal_tree(pid: int, signum: int) -> None:
    for target in descendants(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(target, signum)


@contextlib.contextmanager
def forwarding(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    """Forward INT/TERM/HUP/QUIT to the child's whole tree while it runs."""

    def forward(signum: int, _frame: object) -> None:
        signal_tree(proc.pid, signum)

    previous = {s: signal.signal(s, forward) for s in FORWARDED}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def run_tree(argv: list[str], env: dict[str, str] | None, timeout: float | None,
             pass_fds: tuple[int, ...] = (), streams: Streams = (None, None, None)) -> int:
    """Run ``argv`` (a process whose death kills its whole tree); stdio inherited unless
    ``streams`` (``Popen``'s stdin/stdout/stderr) says otherwise."""
    stdin, stdout, stderr = streams
    proc = subprocess.Popen(argv, env=env, preexec_fn=die_with_parent(),  # noqa: PLW1509
                            pass_fds=pass_fds, stdin=stdin, stdout=stdout, stderr=stderr)
    with forwarding(proc):
        try:
            return exit_status(proc.wait(timeout=timeout))
        except subprocess.TimeoutExpired:
            terminate(proc)
            return TIMEOUT_STATUS
        except BaseException:
            terminate(proc)
            raise


def terminate(proc: subprocess.Popen[bytes]) -> None:
    """TERM the tree, then KILL the top (which takes the rest with it)."""
    signal_tree(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_SECONDS
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
