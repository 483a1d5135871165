"""The engine protocol: every sandbox engine fills this one shape.

An engine prepares a session's sandbox, runs a command in it (stdin, stdout,
stderr, exit status and signals passed through; working directory and
environment preserved), says where its upper directories are, reports what
works for ``workspace doctor``, and releases what it holds. What changed is read
from the upper directories by :mod:`manager.changes.model`, so review and commit are
the same for every engine.
"""

from __future__ import annotations

from pathlib import Path

from manager.changes.model import Layer
from manager.record import Value
from manager.session.store import Session

# The protocols below are for mypy only (typing costs every command ~3 ms to import):
# nothing checks an engine against them at run time (see :func:`leaves_containers`).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO
    from typing import Final
    from typing import Protocol
    from typing import TypeGuard

    from manager.engines.container.cli import Labelled


# Shared with every ``*_enter.sh`` (tests/engines/test_entry_scripts.py ties them):
NOT_ENTERED = 125                       # exit status: the sandbox could not be entered
NO_FALLBACK = "WORKSPACE_NO_FALLBACK"   # set: an entry script fails instead of calling the CLI


class Check(Value):
    """One line of ``workspace doctor``: what was checked, whether it works, and the fix.

    ``warn``: it works, with a limit the user should know of (the fix lifts it)."""

    __slots__ = ("name", "ok", "detail", "fix", "warn")
    name: Final[str]
    ok: Final[bool]
    detail: Final[str]
    fix: Final[str]
    warn: Final[bool]

    def __init__(self, name: str, ok: bool, detail: str = "", fix: str = "",
                 warn: bool = False) -> None:
        self.name = name
        self.ok = ok
        self.detail = detail
        self.fix = fix
        self.warn = warn

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail, "fix": self.fix,
                "warn": self.warn}


Streams = tuple["IO[bytes] | int | None", "IO[bytes] | int | None", "IO[bytes] | int | None"]


class RunRequest(Value):
    """One command to run in a session's sandbox."""

    __slots__ = ("command", "cwd", "timeout", "cwd_out", "stdin", "stdout", "stderr")
    command: Final[str]                   # a bash script, e.g. ``shlex.join(argv)``
    cwd: Final[str]                       # working directory inside the sandbox
    timeout: Final[float | None]          # seconds; the whole process tree dies when it runs out
    cwd_out: Final[Path | None]           # where to record the final working directory
    # The command's standard streams: None inherits this process's (the CLI's terminal).
    stdin: Final[IO[bytes] | int | None]
    stdout: Final[IO[bytes] | int | None]
    stderr: Final[IO[bytes] | int | None]

    def __init__(self, command: str, cwd: str, timeout: float | None = None,
                 cwd_out: Path | None = None, stdin: IO[bytes] | int | None = None,
                 stdout: IO[bytes] | int | None = None,
                 stderr: IO[bytes] | int | None = None) -> None:
        self.command = command
        self.cwd = cwd
        self.timeout = timeout
        self.cwd_out = cwd_out
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr

    def streams(self) -> Streams:
        """(stdin, stdout, stderr), as ``subprocess.Popen`` takes them."""
        return self.stdin, self.stdout, self.stderr


if TYPE_CHECKING:
    class Engine(Protocol):
        name: str

        def health_check(self) -> str | None:
            """``None`` when the engine can run here, else the reason (with the fix)."""

        def checks(self) -> list[Check]:
            """Every check ``workspace doctor`` shows for this engine."""

        def layers(self, session: Session) -> list[Layer]:
            """The session's upper directories and the real directories they stand over."""

        def refresh(self, session: Session) -> None:
            """Make the upper directories current before they are read (engines that keep them
            elsewhere, e.g. in a container engine's volume, copy them back here)."""

        def prepare(self, session: Session) -> None:
            """Make the sandbox ready for calls (idempotent); called under the session lock."""

        def run(self, session: Session, request: RunRequest) -> int:
            """Run with the request's streams (default: this process's stdio); return the exit
            status (128+N for signal N, 124 timeout). Callers use :func:`manager.session.sandbox.run`,
            which takes the session lock and prepares the sandbox first."""

        def entry_argv(self, session: Session, request: RunRequest) -> list[str]:
            """The lean argv that runs ``request`` in a prepared sandbox, for per-call hooks.

            It must never run the command outside the sandbox: when the sandbox is
            not ready it fails (exit 125) or re-prepares it through the CLI.
            """

        def running(self, session: Session) -> list[str]:
            """The calls (and what they left running) in the session now: what they write
            next is not in a review made now, which says so."""

        def release(self, session: Session) -> None:
            """Stop whatever runs for the session (holders, containers); keep its changes."""

        def destroy(self, session: Session) -> None:
            """Release and delete the sandbox, changes included."""


# doctor's line on setting ``network``, the same name on every engine (overlay/netprobe.py
# probes its proxy; try and the containers say what they cut and refuse).
NETWORK_CHECK = "network confinement"
NETWORK_LIST_FIX = ("use engine overlay, or a local podman or docker, for a list of hosts (their "
                    "proxy), or network: off")


def first_failure(checks: list[Check]) -> str | None:
    """``health_check`` from ``checks``: None when all pass, else the first failure and its fix."""
    failed = [c for c in checks if not c.ok]
    return f"{failed[0].detail} (fix: {failed[0].fix})" if failed else None


if TYPE_CHECKING:
    class LeavesContainers(Protocol):
        """An optional capability: engines whose containers may outlive their session (gc sweeps them)."""

        def labelled(self) -> list[Labelled]:
            """Containers of this state directory's sessions, running or not."""

        def remove_orphan(self, found: Labelled) -> None:
            """Remove a container whose session record is gone."""


def leaves_containers(engine: object) -> TypeGuard[LeavesContainers]:
    """``engine`` has the :class:`LeavesContainers` capability (what ``isinstance`` with a
    runtime-checkable protocol checks: its methods are there)."""
    return all(callable(getattr(engine, name, None)) for name in ("labelled", "remove_orphan"))


if TYPE_CHECKING:
    class LeanRun(Engine, Protocol):
        """An optional capability: engines whose entry may be run straight from a record by
        ``workspace run``'s lean path (commands/run_lean), because it hands every call it cannot
        enter to ``workspace run``."""

        def lean_run_files(self, session: Session) -> list[Path]:
            """Files whose content, unchanged, means :meth:`Engine.prepare` would do nothing."""


def has_lean_run(engine: object) -> TypeGuard[LeanRun]:
    """``engine`` has the :class:`LeanRun` capability."""
    return callable(getattr(engine, "lean_run_files", None))
