"""Setting ``network`` a list of hosts on the podman and docker engines (issue 24).

The container runs with ``--network none`` (only ``lo``) and the forwarder
(``overlay/holder/forwarder.py``) as its main command: it listens on 127.0.0.1:3128 inside
and relays to a unix socket in ``SANDBOX/egress/``, mounted read-only at ``/run/ws-egress``.
The session's proxy (``overlay/holder/unix_proxy.py``, the overlay engine's proxy served on
that socket) runs on the host for the container's lifetime: it holds the allow list and
writes the egress record, so a forwarder the sandbox replaces still reaches only it. The
entry script checks the proxy's pid (``egress.pid``) on each call and sets the proxy
variables; a dead proxy sends the call to ``workspace run``, whose prepare starts another.
A remote engine cannot mount a socket of this host: a list is refused there.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from manager.engines import procs
from manager.errors import EngineUnavailable
from manager.session.store import Session

PROXY_PID = "egress.pid"     # "PID START" of the proxy: the entry script checks it
PROXY_LOG = "egress.log"     # the proxy's stderr
HOLDER_DIR = Path(__file__).resolve().parent.parent / "overlay"   # run by its directory, -I
FORWARDER = HOLDER_DIR / "holder" / "forwarder.py"
MOUNT = "/run/ws-egress"     # unix_proxy.MOUNT
DIR = "egress"               # unix_proxy.DIR
READY_TIMEOUT = 90.0


def listed(config: Any, session: Session) -> bool:
    from manager.egress import launch

    return isinstance(launch.effective(config, session.project), list)


def recorded(config: Any, session: Session) -> bool:
    """Whether the session runs a proxy: a list (it relays and records), or off (it only
    records the direct attempts container/direct.py hands it; no socket is mounted)."""
    from manager.egress import launch

    return launch.effective(config, session.project) != "open"


def options(session: Session, options: dict[str, Any]) -> dict[str, Any]:
    """``run`` options: the socket's directory, read-only, and the forwarder as the command."""
    where = session.sandbox / DIR
    where.mkdir(exist_ok=True)
    mount = (str(where), MOUNT, "ro")
    return {**options, "volumes": [*options.get("volumes", []), mount],
            "command": ["python3", "-c", FORWARDER.read_text(encoding="utf-8")]}


def spawn(session: Session, restart: bool = False) -> subprocess.Popen[bytes]:
    """The proxy, bound to its socket (its first word read): its own session, so it outlives
    the caller and no group kill meant for a call reaches it. With ``network`` off there is
    no forwarder to wait for (``--restart``: none says hello)."""
    stop(session)
    argv = [sys.executable, "-I", str(HOLDER_DIR), "egress-proxy", str(session.sandbox),
            *(["--restart"] if restart or _mode(session) == "off" else [])]
    with open(session.sandbox / PROXY_LOG, "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                start_new_session=True, close_fds=True)
    line = _line(proc)
    if line != "bound":
        _fail(proc, session, line)
    return proc


def ready(proc: subprocess.Popen[bytes], session: Session, init: int) -> None:
    """Give the proxy the container's init and wait for the forwarder's hello; record it."""
    if init <= 1:
        _fail(proc, session, "the container is not running, or not on this host (it stops at "
                             "once when its command, the network forwarder, finds no python3)")
    assert proc.stdin is not None
    try:
        proc.stdin.write(f"{init}\n".encode())
        proc.stdin.close()
    except OSError:
        pass
    line = _line(proc)
    if line != "ready":
        _fail(proc, session, line)
    from manager.fs.util import write_atomic

    # The third word: the entry script points calls at the proxy only with a list.
    write_atomic(session.sandbox / PROXY_PID,
                 f"{proc.pid} {procs.start_time(proc.pid)} {_mode(session)}\n".encode())


def _mode(session: Session) -> str:
    """The running policy's mode (``network.json``, written before the container starts)."""
    import json

    from manager.egress import launch

    try:
        return str(json.loads((session.sandbox / launch.POLICY).read_text(encoding="utf-8"))["mode"])
    except (OSError, ValueError, KeyError, TypeError):
        return "list"


def restart(session: Session, init: int) -> None:
    """A proxy that died while its container runs: another on the same socket path (the
    forwarder connects by path, per connection)."""
    ready(spawn(session, restart=True), session, init)


def alive(session: Session) -> bool:
    """Whether no proxy is needed, or the recorded one lives."""
    try:
        pid, start = (session.sandbox / PROXY_PID).read_text().split()[:2]
    except FileNotFoundError:
        return True
    except (OSError, ValueError):
        return False
    return _running(int(pid), start)


def _running(pid: int, start: str) -> bool:
    """That process, and not a zombie: an init that reaps nothing (some VMs' and containers'
    pid 1) keeps a dead proxy's entry, start time and all."""
    return procs.state(pid) not in (None, "Z") and str(procs.start_time(pid)) == start


def stop(session: Session) -> None:
    """End the recorded proxy (it ends with its container anyway)."""
    path = session.sandbox / PROXY_PID
    with contextlib.suppress(OSError, ValueError):
        pid, start = path.read_text().split()[:2]
        if _running(int(pid), start):
            os.kill(int(pid), 15)
    path.unlink(missing_ok=True)


def _line(proc: subprocess.Popen[bytes]) -> str:
    import select

    assert proc.stdout is not None
    ready_, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT)
    return proc.stdout.readline().decode(errors="replace").strip() if ready_ else "no answer"


def _fail(proc: subprocess.Popen[bytes], session: Session, why: str) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    proc.wait()
    raise EngineUnavailable(
        f"the network proxy of session {session.id} could not start: "
        f"{why.removeprefix('error: ') or 'no answer'} (log: {session.sandbox / PROXY_LOG})",
        hint="network is a list of hosts, which needs this proxy and the container's "
             "forwarder (python3 in the image); else network: off, or engine overlay")
