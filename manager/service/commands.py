"""The read-only review commands (``status``, ``diff``, ``budget``) run by the service.

The plugin's CLI launcher (bin/workspace) asks the service for them when its own output
and error output are pipes or ``/dev/null`` (a terminal gets colour and a pager, a file
an offset: the CLI's own): the request is ``CLI`` with the launcher's plugin root and
argv, NUL-separated. The service answers its token on a line at once, then forks: the
child runs the CLI's own ``main`` (imported once, by the service) with the client's
environment, working directory and umask, writing straight into the client's own
stdout and stderr (opened from ``/proc/PID/fd``), and ends the answer with the exit
status and a NUL. ``FALLBACK`` instead when the command was not run: the launcher runs
the CLI itself. Nothing else of the CLI is served (a command that changes anything runs
as its own process, as ever).
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys

SERVED = ("status", "diff", "budget")


def request(raw: bytes, root: str, pid: int) -> tuple[list[str], tuple[int, int]] | None:
    """The argv to run for a ``CLI`` request (``ROOT OUT ERR ARGV...``, each ending in a NUL;
    OUT and ERR: the client's descriptors of its stdout and stderr), and those two outputs
    opened anew; None when the service must not run it: another plugin root's launcher (its
    own code answers), a command that is not a read-only review, or outputs that are not
    pipes or ``/dev/null``."""
    words = [os.fsdecode(w) for w in raw.split(b"\0")]
    if len(words) < 5 or words[-1] != "" or os.path.realpath(words[0]) != root:
        return None
    argv = words[3:-1]
    if argv[0] not in SERVED or not (words[1].isdigit() and words[2].isdigit()):
        return None
    outs = outputs(pid, int(words[1]), int(words[2]))
    return None if outs is None else (argv, outs)


def umask_of(pid: int) -> int | None:
    """The client's umask, when its uids and groups are the service's (a child of the
    service has those: not a group added since it started); None otherwise."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        umask = int(fields["Umask"], 8)
    except (OSError, KeyError, ValueError):
        return None
    uids = {int(u) for u in fields.get("Uid", "").split()}
    gids = {int(g) for g in fields.get("Gid", "").split()}
    groups = {int(g) for g in fields.get("Groups", "").split()}
    same = uids == {os.geteuid()} and gids == {os.getegid()} and groups == set(os.getgroups())
    return umask if same else None


def outputs(pid: int, out: int, err: int) -> tuple[int, int] | None:
    """The client's descriptors ``out`` and ``err``, opened anew: each a pipe or a character
    device that is no terminal (``/dev/null``); None for anything else (the CLI runs then)."""
    opened: list[int] = []
    try:
        for n in (out, err):
            fd = os.open(f"/proc/{pid}/fd/{n}", os.O_WRONLY | os.O_CLOEXEC | os.O_NOCTTY)
            opened.append(fd)
            mode = os.fstat(fd).st_mode
            if not (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) and not os.isatty(fd)):
                raise OSError("not a pipe")
    except OSError:
        for fd in opened:
            os.close(fd)
        return None
    return opened[0], opened[1]


def prepare() -> None:
    """Import the CLI once, in the service: each child starts with it."""
    import manager.main  # noqa: F401

    for name in SERVED:
        __import__(f"manager.commands.{name}")


def run_child(argv: list[str], env: dict[str, str], cwd: str, umask: int,
              outs: tuple[int, int], keep: int) -> int:
    """In the forked child: become the client's CLI process and run ``argv``; every
    descriptor of the service's but ``keep`` (the connection) closed."""
    from manager import ui
    from manager.main import main

    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(outs[0], 1)
    os.dup2(outs[1], 2)
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 20)
    os.umask(umask)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    ui.forget_terminal()
    sys.argv = ["workspace", *argv]
    try:
        return main(argv)
    except SystemExit as exc:   # argparse's usage errors, --help
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError):
                stream.flush()
