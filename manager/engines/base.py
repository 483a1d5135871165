"""The engine protocol: every sandbox engine fills this one shape.

An engine prepares a session's sandbox, runs a command in it (stdin, stdout,
stderr, exit status and signals passed through; working directory and
environment preserved), says where its upper directories are, reports what
works for ``workspace doctor``, and releases what it holds. What changed is read
from the upper directories by :mod:`manager.changes.model`, so review and commit are
the same for every engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import IO
from typing import TYPE_CHECKING
from typing import Protocol
from typing import runtime_checkable

from manager.changes.model import Layer
from manager.session.store import Session

if TYPE_CHECKING:
    from manager.engines.container_cli import Labelled


# Shared with every ``*_enter.sh`` (tests/engines/test_entry_scripts.py ties them):
NOT_ENTERED = 125                       # exit status: the sandbox could not be entered
NO_FALLBACK = "WORKSPACE_NO_FALLBACK"   # set: an entry script fails instead of calling the CLI


@dataclass(frozen=True)
class Check:
    """One line of ``workspace doctor``: what was checked, whether it works, and the fix."""

    name: str
    ok: bool
    detail: str = ""
    fix: str = ""

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail, "fix": self.fix}


Streams = tuple["IO[bytes] | int | None", "IO[bytes] | int | None", "IO[bytes] | int | None"]


@dataclass(frozen=True)
class RunRequest:
    """One command to run in a session's sandbox."""

    command: str                   # a bash script, e.g. ``shlex.join(argv)``
    cwd: str                       # working directory inside the sandbox
    timeout: float | None = None   # seconds; the whole process tree dies when it runs out
    cwd_out: Path | None = None    # where to record the final working directory
    # The command's standard streams: None inherits this process's (the CLI's terminal).
    stdin: IO[bytes] | int | None = None
    stdout: IO[bytes] | int | None = None
    stderr: IO[bytes] | int | None = None

    def streams(self) -> Streams:
        """(stdin, stdout, stderr), as ``subprocess.Popen`` takes them."""
        return self.stdin, self.stdout, self.stderr


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

    def release(self, session: Session) -> None:
        """Stop whatever runs for the session (holders, containers); keep its changes."""

    def destroy(self, session: Session) -> None:
        """Release and delete the sandbox, changes included."""


def first_failure(checks: list[Check]) -> str | None:
    """``health_check`` from ``checks``: None when all pass, else the first failure and its fix."""
    failed = [c for c in checks if not c.ok]
    return f"{failed[0].detail} (fix: {failed[0].fix})" if failed else None


@runtime_checkable
class LeavesContainers(Protocol):
    """An optional capability: engines whose containers may outlive their session (gc sweeps them)."""

    def labelled(self) -> list[Labelled]:
        """Containers of this state directory's sessions, running or not."""

    def remove_orphan(self, found: Labelled) -> None:
        """Remove a container whose session record is gone."""
