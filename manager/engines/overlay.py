"""The built-in overlay engine (Linux): user + mount namespaces and overlayfs.

The sandbox directory has binpash/try's layout (``upperdir/``, ``workdir/``,
``temproot/``), so ``try summary DIR`` and ``try commit DIR`` read it too. A
holder process (:mod:`manager.engines.overlay_holder`) keeps the namespaces and
mounts alive between calls; each call enters them through
``overlay_enter.sh`` and gets a pid namespace of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from manager.changes.model import Layer
from manager.config import Config
from manager.engines import procs
from manager.engines.base import Check
from manager.engines.base import RunRequest
from manager.engines.base import first_failure
from manager.errors import EngineUnavailable
from manager.errors import WorkspaceError
from manager.fsutil import locked
from manager.session.store import Session

ENTER_SCRIPT = Path(__file__).with_name("overlay_enter.sh")
HOLDER_SCRIPT = Path(__file__).with_name("overlay_holder.py")  # stdlib only: runs with -I
HOLDER_PID = "holder.pid"
READY_TIMEOUT = 20.0
NOT_ENTERED = 125  # overlay_enter.sh: the sandbox could not be entered
TOOLS = ("unshare", "nsenter", "mount")


class OverlayEngine:
    name = "overlay"

    def __init__(self, config: Config) -> None:
        self.config = config

    # -- availability -------------------------------------------------------

    def health_check(self) -> str | None:
        return first_failure(self.checks())

    def checks(self) -> list[Check]:
        from manager.engines import overlay_probe

        return overlay_probe.checks()

    # -- sandbox ------------------------------------------------------------

    def refresh(self, session: Session) -> None:
        """The upper dirs are the live ones: nothing to bring up to date."""

    def layers(self, session: Session) -> list[Layer]:
        try:
            scaffold = frozenset(json.loads((session.sandbox / "scaffold.json").read_text()))
        except (OSError, ValueError):
            scaffold = frozenset()
        return [Layer(upper=session.sandbox / "upperdir", target=Path("/"), scaffold=scaffold)]

    def prepare(self, session: Session) -> None:
        with locked(session.sandbox / "prepare.lock", timeout=60, what=f"session {session.id}"):
            if holder_pid(session.sandbox) is None:
                self._start_holder(session)

    def _start_holder(self, session: Session) -> None:
        sandbox = session.sandbox
        idle = str(self.config["overlay.idle_timeout_hours"] * 3600)
        argv = ["unshare", "--user", "--map-root-user", "--mount", "--",
                sys.executable, "-I", str(HOLDER_SCRIPT), str(sandbox), idle, session.project]
        log = open(sandbox / "holder.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=log, start_new_session=True, close_fds=True)
        except FileNotFoundError as exc:
            raise EngineUnavailable("`unshare` not found", hint="install util-linux") from exc
        finally:
            log.close()
        line = _read_ready(proc)
        if line != "ready":
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()
            raise EngineUnavailable(
                f"the overlay sandbox could not start: {line or 'no answer'} "
                f"(log: {sandbox / 'holder.log'})",
                hint="run `workspace doctor` to see what this host supports",
            )
        (sandbox / HOLDER_PID).write_text(f"{proc.pid} {procs.start_time(proc.pid)}\n")

    def run(self, session: Session, request: RunRequest) -> int:
        env = dict(os.environ, WORKSPACE_NO_FALLBACK="1")
        status = procs.run_tree(self.entry_argv(session, request), env, request.timeout)
        if status == NOT_ENTERED and holder_pid(session.sandbox) is None:
            # The holder died between prepare and entry; the command never ran.
            self.prepare(session)
            status = procs.run_tree(self.entry_argv(session, request), env, request.timeout)
        return status

    def entry_argv(self, session: Session, request: RunRequest) -> list[str]:
        return ["/bin/bash", str(ENTER_SCRIPT), str(session.sandbox), session.id,
                sys.executable, request.cwd, str(request.cwd_out or ""), request.command]

    def release(self, session: Session) -> None:
        pid = holder_pid(session.sandbox)
        if pid is None:
            return
        busy = namespace_members(pid)
        if busy:
            raise WorkspaceError(
                f"commands are still running in session {session.id} (pids {', '.join(map(str, busy))})",
                hint="wait for them to finish or stop them, then try again",
            )
        _kill(pid)
        (session.sandbox / HOLDER_PID).unlink(missing_ok=True)

    def destroy(self, session: Session) -> None:
        self.release(session)
        if session.sandbox.exists():
            import shutil

            shutil.rmtree(session.sandbox)


def _read_ready(proc: subprocess.Popen[bytes]) -> str:
    import selectors

    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(READY_TIMEOUT):
            return f"no answer within {READY_TIMEOUT:.0f} s"
    line = proc.stdout.readline().decode(errors="replace").strip()
    proc.stdout.close()
    return line


def holder_pid(sandbox: Path) -> int | None:
    """The live holder's pid, or None (missing, dead, or a reused pid)."""
    try:
        pid_text, start = (sandbox / HOLDER_PID).read_text().split()
        pid = int(pid_text)
        alive = str(procs.start_time(pid)) == start and not procs.is_zombie(pid)
        return pid if alive and os.path.exists(f"/proc/{pid}/ns/mnt") else None
    except (OSError, ValueError):
        return None


def namespace_members(holder: int) -> list[int]:
    """Processes other than the holder inside its user namespace."""
    try:
        ns = os.readlink(f"/proc/{holder}/ns/user")
    except OSError:
        return []
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != holder:
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{entry}/ns/user") == ns:
                    members.append(int(entry))
    return members


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        if procs.is_zombie(pid):
            return
        time.sleep(0.01)
