"""The built-in overlay engine (Linux): user + mount namespaces and overlayfs.

The sandbox directory has binpash/try's layout (``upperdir/``, ``workdir/``,
``temproot/``), so ``try summary DIR`` and ``try commit DIR`` read it too. A
holder process (:mod:`manager.engines.overlay.holder`) keeps the namespaces and
mounts alive between calls; each call enters them through
``enter.sh`` into the session's pid namespace (see ``holder.session_init.start_init``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from manager import fastjson
from manager.changes.model import Layer
from manager.config import Config
from manager.engines import procs
from manager.engines.base import Check
from manager.engines.base import RunRequest
from manager.engines.base import first_failure
from manager.engines.overlay import ids as overlay_ids
from manager.engines.overlay.holder.names import HANDED_BACK
from manager.engines.overlay.holder.names import HOLDER_LOG
from manager.engines.overlay.holder.names import HOLDER_PID
from manager.engines.overlay.holder.names import HOLDER_PIDNS
from manager.engines.overlay.holder.names import HOLDER_VIEW
from manager.engines.overlay.holder.names import HOLDER_VIEWS
from manager.engines.overlay.holder.names import PREPARE_LOCK
from manager.engines.overlay.holder.names import SCAFFOLD
from manager.engines.overlay.holder.names import SKELETON
from manager.engines.overlay.holder.names import UPPER
from manager.errors import EngineUnavailable
from manager.errors import WorkspaceError
from manager.fs.util import locked
from manager.fs.util import write_atomic
from manager.session.store import Session

CWD_ELSE = "__WS_CWD_ELSE"   # manager.claude.rewrite.CWD_ELSE (the hook sits above the engines)

ENTER_SCRIPT = Path(__file__).with_name("enter.sh")
HOLDER_PROGRAM = Path(__file__).parent   # run by its directory, -I: see __main__.py
READY_TIMEOUT = 60.0  # a loaded machine can take long to build the mounts
# A fresh holder each time: the real project changing all the time (a build outside writing
# into it) retires each one soon after it starts.
ENTRY_RETRIES = 3
NOT_ENTERED = 125  # enter.sh: the sandbox could not be entered
TRIAL_CHECK = "a call through the entry, in a scratch sandbox"
TOOLS = ("unshare", "nsenter", "mount")


class OverlayEngine:
    name = "overlay"

    def __init__(self, config: Config) -> None:
        self.config = config

    # -- availability -------------------------------------------------------

    def health_check(self) -> str | None:
        """Whether calls can run here. Not the network probe (doctor's): a confinement that
        cannot be set up fails the session that asks for it, at its holder's start; a slow
        probe on a loaded machine must not make `auto` pass over this engine."""
        from manager.engines.overlay import probe as overlay_probe
        return first_failure(overlay_probe.checks(network=False))

    def checks(self) -> list[Check]:
        from manager.engines.overlay import probe as overlay_probe
        return overlay_probe.checks()

    # -- sandbox ------------------------------------------------------------

    def refresh(self, session: Session) -> None:
        """The upper dirs are the live ones: nothing to bring up to date."""

    def layers(self, session: Session) -> list[Layer]:
        try:
            scaffold = frozenset(fastjson.loads((session.sandbox / SCAFFOLD).read_text()))
        except (OSError, ValueError):
            scaffold = frozenset()
        return [Layer(upper=session.sandbox / UPPER, target=Path("/"), scaffold=scaffold,
                      ids=overlay_ids.review_map(session.sandbox))]

    def prepare(self, session: Session) -> None:
        with locked(session.sandbox / PREPARE_LOCK, timeout=60, what=f"session {session.id}"):
            self._network_changed(session)
            if holder_pid(session.sandbox) is None:
                self._start_holder(session)

    def _network_changed(self, session: Session) -> None:
        """A holder made for another ``network`` than the configuration's now is replaced
        (refused while commands still run in it: none runs under the old one by mistake)."""
        from manager.egress import launch

        pid = holder_pid(session.sandbox)
        if pid is None or not launch.changed(session.sandbox, self.config, session.project):
            (session.sandbox / launch.STALE).unlink(missing_ok=True)
            return
        busy = namespace_members(pid, session.sandbox)
        if busy:
            raise EngineUnavailable(
                f"setting network changed since the sandbox of session {session.id} started, "
                f"and commands are still running in it (pids {', '.join(map(str, busy))})",
                hint="run the command again when they have ended, or stop them")
        _kill(pid)
        (session.sandbox / HOLDER_PID).unlink(missing_ok=True)
        (session.sandbox / launch.STALE).unlink(missing_ok=True)

    def _start_holder(self, session: Session) -> None:
        from manager.egress import launch  # setting `network`: the holder reads it at start

        idle = self.config["overlay.idle_timeout_hours"] * 3600
        from manager import hide

        hide.write_list(session.sandbox, hide.targets(self.config, str(session.project)))
        hide.write_patterns(session.sandbox, self.config, str(session.project))
        launch.write_policy(session.sandbox, self.config, session.project)
        start_holder(session.sandbox, session.project, idle, session.id)

    def run(self, session: Session, request: RunRequest) -> int:
        request = request.replace(cwd=self._cwd_inside(session, request.cwd))
        status, why = self._enter(session, request)
        for _ in range(ENTRY_RETRIES):
            if why is None:
                return status
            # Not entered, the command never ran: the holder went away between prepare
            # and entry (idle exit, retired after an outside change). A fresh one.
            self.prepare(session)
            status, why = self._enter(session, request)
        if why is not None:
            raise EngineUnavailable(why, hint="run `workspace doctor` to see what fails; the "
                                    f"holder's log: {session.sandbox / HOLDER_LOG}")
        return status

    def _enter(self, session: Session, request: RunRequest) -> tuple[int, str | None]:
        """Run through the entry: (status, None), or (125, why) when it did not enter."""
        read_end, write_end = os.pipe()
        env = dict(os.environ, WORKSPACE_NO_FALLBACK="1", WORKSPACE_NOT_ENTERED_FD=str(write_end))
        env.pop("WORKSPACE_LEAN_RUN", None)   # the lean path's alone (commands/run_lean)
        try:
            status = procs.run_tree(self.entry_argv(session, request), env, request.timeout,
                                    pass_fds=(write_end,), streams=request.streams())
        finally:
            os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            why = pipe.read().decode(errors="replace").strip()
        return status, (why or None)

    def _cwd_inside(self, session: Session, cwd: str) -> str:
        """``cwd`` as the sandbox sees it; a holder that cannot see it yet is replaced.

        A directory made after the holder started can be missing from its view
        (overlayfs remembers failed lookups; a directory with mounts below it is
        a snapshot). The command never runs anywhere else: if the directory
        cannot be shown, this fails.
        """
        pid = holder_pid(session.sandbox)
        if pid is not None and os.path.isdir(f"/proc/{pid}/root{cwd}"):
            return cwd  # what the entry checks; symlinks to absolute paths take the slow way
        for replaced in (False, True):
            pid = holder_pid(session.sandbox)
            if pid is None:
                self.prepare(session)
                pid = holder_pid(session.sandbox)
            view = view_paths(session.sandbox, pid) if pid is not None else None
            inside = resolve_inside(view, cwd) if view is not None else None
            if inside is not None:
                return inside
            if replaced or pid is None or not os.path.isdir(cwd):
                break
            self._replace(session, pid, cwd)
        other = os.environ.pop(CWD_ELSE, "")   # the hook's: the client's own directory
        if other.startswith("/") and other != cwd:
            found = self._cwd_inside(session, other)
            from manager import ui
            ui.err("workspace: the directory the last command reported ending in does not exist "
                   f"in the sandbox; starting in {found}")
            return found
        where = "outside only (removed inside the sandbox?)" if os.path.isdir(cwd) else "nowhere"
        raise EngineUnavailable(f"{cwd} does not exist in the sandbox; it exists {where}",
                                hint="run the command from a directory that exists in the sandbox")

    def _replace(self, session: Session, pid: int, cwd: str) -> None:
        """A fresh holder, whose new mounts see the real filesystem as it is now."""
        with locked(session.sandbox / PREPARE_LOCK, timeout=60, what=f"session {session.id}"):
            if holder_pid(session.sandbox) == pid:
                busy = namespace_members(pid, session.sandbox)
                if busy:
                    raise EngineUnavailable(
                        f"{cwd} was made after the sandbox of session {session.id} started, and "
                        f"commands are still running in it (pids {', '.join(map(str, busy))}): "
                        "it cannot be shown before they end",
                        hint="run the command again when they have ended")
                _kill(pid)
                (session.sandbox / HOLDER_PID).unlink(missing_ok=True)
            if holder_pid(session.sandbox) is None:
                self._start_holder(session)

    def lean_run_files(self, session: Session) -> list[Path]:
        """What ``workspace run``'s lean path (commands/run_lean) keys its record on, besides
        the configuration: the running holder, whose pid file (pid, start time) is rewritten
        at each start; :meth:`prepare`'s decisions hold while it runs. The entry itself hands
        a call it cannot enter to ``workspace run``."""
        return [session.sandbox / HOLDER_PID]

    def entry_argv(self, session: Session, request: RunRequest) -> list[str]:
        return ["/bin/bash", str(ENTER_SCRIPT), str(session.sandbox), session.id,
                sys.executable, request.cwd, str(request.cwd_out or ""), request.command]

    def running(self, session: Session) -> list[str]:
        pid = holder_pid(session.sandbox)
        return [] if pid is None else [str(p) for p in namespace_members(pid, session.sandbox)]

    def release(self, session: Session) -> None:
        pid = holder_pid(session.sandbox)
        if pid is None:
            hand_back(session.sandbox)   # a holder that exited by itself did not
            return
        busy = namespace_members(pid, session.sandbox)
        if busy:
            raise WorkspaceError(
                f"commands are still running in session {session.id} (pids {', '.join(map(str, busy))})",
                hint="wait for them to finish or stop them, then try again",
            )
        _kill(pid)
        (session.sandbox / HOLDER_PID).unlink(missing_ok=True)
        _remove_cgroups(session.sandbox)
        hand_back(session.sandbox)

    def destroy(self, session: Session) -> None:
        self.release(session)
        if session.sandbox.exists():
            hand_back(session.sandbox, skeleton=True)
            remove_tree(session.sandbox)


def start_holder(sandbox: Path, project: str, idle_seconds: float, session_id: str) -> None:
    """Start the holder and prove that a call can enter it; EngineUnavailable otherwise.

    A holder that retires at its first call (what changed outside while it built, e.g.
    /tmp's churn on a busy machine, could not be shown) is followed by a fresh one, as a
    call's own entry does (``ENTRY_RETRIES``)."""
    for attempt in range(ENTRY_RETRIES):
        retired = _start_holder_once(sandbox, project, idle_seconds, session_id,
                                     last=attempt == ENTRY_RETRIES - 1)
        if not retired:
            return


def _retirements(sandbox: Path) -> list[str]:
    """The reasons of the "retired: WHY" lines in the holders' log (appended to by each)."""
    try:
        lines = (sandbox / HOLDER_LOG).read_text(errors="replace").splitlines()
    except OSError:
        return []
    return [line.removeprefix("retired: ") for line in lines if line.startswith("retired: ")]


def _start_holder_once(sandbox: Path, project: str, idle_seconds: float, session_id: str,
                       last: bool) -> bool:
    """One holder started and entered; True when it retired at once (try another)."""
    retired_before = len(_retirements(sandbox))
    maps = overlay_ids.plan()
    (sandbox / HANDED_BACK).unlink(missing_ok=True)
    _remove_cgroups(sandbox)   # a holder that died by itself left them
    proc, line = _spawn_holder(sandbox, project, idle_seconds, maps)
    if line.startswith("maps: ") and maps.mode == overlay_ids.SUBORDINATE:
        # newuidmap refused (a stale /etc/subuid, a policy): today's single mapping, not a failure.
        maps = overlay_ids.single(line.removeprefix("maps: "))
        proc, line = _spawn_holder(sandbox, project, idle_seconds, maps)
    if line != "ready":
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()
        raise EngineUnavailable(
            f"the overlay sandbox could not start: {line or 'no answer'} "
            f"(log: {sandbox / HOLDER_LOG})",
            hint="run `workspace doctor` to see what this host supports",
        )
    overlay_ids.record(sandbox, maps)
    as_uid = "" if maps.as_uid is None else f" {maps.as_uid}"
    # The holder made the session's pid namespace, which calls join (see enter.sh),
    # and pivoted into the sandbox's root: calls take root and namespaces from its init (the
    # holder itself steps into the host's mount namespace for a moment when it refreshes).
    write_atomic(sandbox / HOLDER_PIDNS, f"{proc.pid} {procs.children(proc.pid)[0]} views\n".encode())
    write_atomic(sandbox / HOLDER_PID, f"{proc.pid} {procs.start_time(proc.pid)}{as_uid}\n".encode())
    why = _entry_fails(sandbox, session_id)
    if why is None:
        return False
    _kill(proc.pid)
    (sandbox / HOLDER_PID).unlink(missing_ok=True)
    retired = _retirements(sandbox)[retired_before:]
    if retired:
        if not last:
            return True
        why = f"{why} (it retired: {retired[-1]})"
    raise EngineUnavailable(f"the overlay sandbox cannot be entered: {why}", hint=entry_fix(why))


def hand_back(sandbox: Path, *, skeleton: bool = False) -> None:
    """With subordinate ids, the holder's own entries belong on disk to the namespace's
    root (a subordinate id): give them to the user, who commits, discards and removes them.
    A failure leaves them, and only their removal fails, with a clear error."""
    maps = overlay_ids.recorded(sandbox)
    if maps is None or maps.mode != overlay_ids.SUBORDINATE:
        return
    if (sandbox / HANDED_BACK).exists() and not skeleton:
        return
    argv = [sys.executable, "-I", str(HOLDER_PROGRAM), "--hand-back", str(sandbox),
            str(os.geteuid()), str(os.getegid()), *([SKELETON] if skeleton else [])]
    proc, line = _spawn(argv, sandbox, maps)   # mapped as the holder was: its ids are mapped
    proc.wait()
    if line == "ready":
        (sandbox / HANDED_BACK).touch()
    else:
        with contextlib.suppress(OSError), open(sandbox / HOLDER_LOG, "a") as log:
            log.write(f"hand-back: {line}\n")


def _spawn_holder(sandbox: Path, project: str, idle_seconds: float,
                  maps: overlay_ids.IdMaps) -> tuple[subprocess.Popen[bytes], str]:
    argv = [sys.executable, "-I", str(HOLDER_PROGRAM), str(sandbox), str(idle_seconds), project]
    return _spawn(argv, sandbox, maps)


def _spawn(argv: list[str], sandbox: Path,
           maps: overlay_ids.IdMaps) -> tuple[subprocess.Popen[bytes], str]:
    """The holder script and its last word: "ready", "maps: why", or why it failed."""
    log = open(sandbox / HOLDER_LOG, "ab")  # noqa: SIM115 - handed to the child
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=log, start_new_session=True, close_fds=True)
    finally:
        log.close()
    assert proc.stdin is not None
    line = _read_line(proc)
    if line == "userns":
        why = overlay_ids.apply(proc.pid, maps)
        if why is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()
            return proc, f"maps: {why}"
        with contextlib.suppress(BrokenPipeError):
            proc.stdin.write(b"go\n")
            proc.stdin.close()
        line = _read_line(proc)
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.close()
    assert proc.stdout is not None
    proc.stdout.close()
    return proc, line


def _entry_fails(sandbox: Path, session_id: str) -> str | None:
    """Why `true` through the entry fails (flags, namespaces, pid namespace), or None."""
    argv = ["/bin/bash", str(ENTER_SCRIPT), str(sandbox), session_id, sys.executable, "/", "", "true"]
    try:
        proc = subprocess.run(argv, env=dict(os.environ, WORKSPACE_NO_FALLBACK="1"),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=READY_TIMEOUT)
    except subprocess.TimeoutExpired:
        return f"no answer within {READY_TIMEOUT:.0f} s"
    if proc.returncode == 0:
        return None
    return (proc.stderr.strip() or f"exit {proc.returncode}").removeprefix("workspace: ")


def entry_fix(why: str) -> str:
    if "nsenter" in why and ("not found" in why or "cannot run" in why):
        return "install util-linux and put its nsenter on PATH"
    if "preserve-credentials" in why or "unrecognized option" in why:
        return "nsenter must take --preserve-credentials: install util-linux >= 2.26"
    if "Operation not permitted" in why or "Permission denied" in why:
        return ("allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
                "or on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0), or use podman/docker")
    return "run `workspace doctor`; or use engine podman or docker"


def view_paths(sandbox: Path, pid: int) -> tuple[str, str, str] | None:
    """The user namespace, mount namespace and root of the calls' view: the current view a
    holder holds as descriptors (holder/views.py; None when it names none: never the
    holder's own namespaces instead), the session's init's of one that pivoted (while it is
    still the holder's child), else the holder's."""
    def of(process: int) -> tuple[str, str, str]:
        return f"/proc/{process}/ns/user", f"/proc/{process}/ns/mnt", f"/proc/{process}/root"

    try:
        fields = (sandbox / HOLDER_PIDNS).read_text().split()
        if len(fields) < 2 or int(fields[0]) != pid:
            return of(pid)
        init = int(fields[1])
        if fields[2:] != ["views"]:
            return of(init if init in procs.children(pid) else pid)
        fields = (sandbox / HOLDER_VIEW).read_text().split()
        root, user, mnt = fields[1:4]
        if init not in procs.children(pid):
            return None
        owner = pid   # the holder's descriptors, or a view that stays
        if len(fields) >= 6:   # that view: still the init's, started when it was named
            owner = int(fields[4])
            if owner not in procs.children(init) or str(procs.start_time(owner)) != fields[5]:
                return None
        if all(p.startswith(f"/proc/{owner}/") for p in (root, user, mnt)):
            return user, mnt, root
    except (OSError, ValueError):
        pass
    return None


def resolve_inside(view: tuple[str, str, str], cwd: str) -> str | None:
    """``cwd`` resolved in ``view`` (:func:`view_paths`: symlinks as the sandbox sees
    them), or None. Resolved by a fork of this process in the view's user and mount
    namespaces and root: no program of the sandbox's runs (a `/bin/sh` the agent wrote there
    would run in the host's pid namespace, where the user's own processes are in reach)."""
    import ctypes

    clone_newns, clone_newuser = 0x00020000, 0x10000000
    try:
        handles = [os.open(view[0], os.O_RDONLY), os.open(view[1], os.O_RDONLY),
                   os.open(view[2], os.O_RDONLY | os.O_DIRECTORY)]
    except OSError:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    answer, answer_write = os.pipe()
    child = os.fork()
    if child == 0:   # one thread here: setns into a user namespace takes no more
        try:
            os.close(answer)
            user, mnt, root = handles
            if libc.setns(user, clone_newuser) == 0 and libc.setns(mnt, clone_newns) == 0:
                os.fchdir(root)
                os.chroot(".")
                os.chdir(cwd)
                os.write(answer_write, os.fsencode(os.getcwd()))
        finally:
            os._exit(0)
    import select

    os.close(answer_write)
    for fd in handles:
        os.close(fd)
    with os.fdopen(answer, "rb") as f:
        inside = os.fsdecode(f.read()) if select.select([f], [], [], READY_TIMEOUT)[0] else ""
    if not inside:
        _kill(child)
    with contextlib.suppress(ChildProcessError):   # reaped already (SIGCHLD ignored)
        os.waitpid(child, 0)
    return inside if inside.startswith("/") else None


def remove_tree(path: Path) -> None:
    """``rm -rf``, also of what overlayfs leaves unreadable (its work dirs are mode 0000)."""
    from manager.fs.util import remove_tree as remove

    with contextlib.suppress(OSError):
        os.chmod(path, 0o700)
    remove(path)


def _read_line(proc: subprocess.Popen[bytes]) -> str:
    import selectors

    assert proc.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(READY_TIMEOUT):
            return f"no answer within {READY_TIMEOUT:.0f} s"
    return proc.stdout.readline().decode(errors="replace").strip()


def holder_pid(sandbox: Path) -> int | None:
    """The live holder's pid, or None (missing, dead, or a reused pid)."""
    try:
        pid_text, start = (sandbox / HOLDER_PID).read_text().split()[:2]
        pid = int(pid_text)
        alive = str(procs.start_time(pid)) == start and not procs.is_zombie(pid)
        return pid if alive and os.path.exists(f"/proc/{pid}/ns/mnt") else None
    except (OSError, ValueError):
        return None


def namespace_members(holder: int, sandbox: Path) -> list[int]:
    """Processes inside the holder's user namespace or the session's pid namespace or one
    below it (calls run in views nested in it: holder/views.py; a call's own pid
    namespaces: holder/pidns.py), but the holder, its own children (the session's init,
    passing mount helpers) and the views that stay (``holder.views``, where no call can
    reach them): the calls and what they left running. An orphan the init is ending counts
    until it is gone (a chain of them may outlive a look: attack pass 15)."""
    from manager.engines.overlay.holder import pidns

    try:
        ns = os.readlink(f"/proc/{holder}/ns/user")
    except OSError:
        return []
    session = pidns.inode(f"/proc/{holder}/ns/pid_for_children")
    if session == pidns.inode(f"/proc/{holder}/ns/pid"):
        session = -1   # no pid namespace of the session's
    own = set(procs.children(holder)) | _staying_views(sandbox)
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != holder and int(entry) not in own:
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{entry}/ns/user") == ns or pidns.below(entry, session):
                    members.append(int(entry))
    return members


def _staying_views(sandbox: Path) -> set[int]:
    """The views the holder names as staying, those still running with that start."""
    try:
        lines = (sandbox / HOLDER_VIEWS).read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError):
        return set()
    found = set()
    for line in lines:
        pid, _, start = line.partition(" ")
        if pid.isdigit() and str(procs.start_time(int(pid))) == start:
            found.add(int(pid))
    return found


def _remove_cgroups(sandbox: Path) -> None:
    """The session's cgroups (run as root), once the processes in them are gone."""
    from manager.engines.overlay.holder import cgroups

    deadline = time.monotonic() + 2
    while (sandbox / cgroups.RECORD).exists():
        cgroups.remove(sandbox)
        if not (sandbox / cgroups.RECORD).read_text() or time.monotonic() > deadline:
            return
        time.sleep(0.02)


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
