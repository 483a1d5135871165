"""Direct attempts from a podman or docker session container on the record (issue 24).

With ``network`` a list the container runs ``--network none`` and reaches the listed hosts
through the host's proxy (:mod:`.egress`). A connection made around it (a raw connect, a
UDP send, ``curl --noproxy``) failed with "network unreachable" and left no trace. Once the
container and its proxy run, a one-shot helper container joins the container's network
namespace with NET_ADMIN and NET_RAW (the session container never has NET_ADMIN), from
workspace's own image (``container.image``, never a devcontainer's: that one is the
agent's), and makes the overlay engine's watched pair there (``holder/direct_attach.py``):
the proxy reads its packet socket as the overlay proxy does, records each attempt with its
call and refuses it at once. An engine or kernel that cannot (no veth, no image) keeps
today's behaviour, with a line in ``egress.log``.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from typing import Any

from manager.engines.container.egress import DIR
from manager.engines.container.egress import HOLDER_DIR
from manager.engines.container.egress import MOUNT
from manager.engines.container.egress import PROXY_LOG
from manager.session.store import Session

TOKEN = "egress.direct"        # holder/direct_attach.TOKEN
ENV = "WS_DIRECT_TOKEN"        # holder/direct_attach.ENV
CODE = "/run/ws-holder"        # the holder's code in the helper, read-only
TIMEOUT = 60.0


def recorder(session: Session) -> subprocess.Popen[bytes] | None:
    """With ``network`` off, the proxy as a recorder only: None (and a line in its log) when
    it cannot start, for the session runs without it as before."""
    from manager.engines.container import egress
    from manager.errors import EngineUnavailable

    try:
        return egress.spawn(session)
    except EngineUnavailable as exc:
        _say(session, str(exc))
        return None


def recorder_ready(proc: subprocess.Popen[bytes], session: Session, init: int) -> bool:
    """The recorder told the container's init; False (logged, the recorder gone) when it
    cannot watch it (an engine in a VM: no pid of this host)."""
    from manager.engines.container import egress
    from manager.errors import EngineUnavailable

    try:
        egress.ready(proc, session, init)
        return True
    except EngineUnavailable as exc:
        _say(session, str(exc))
        return False


def _say(session: Session, why: str) -> None:
    with open(session.sandbox / PROXY_LOG, "a", encoding="utf-8") as log:
        log.write(f"network: direct connections are refused but not recorded ({why})\n")


def attach(engine: Any, session: Session, container: str) -> bool:
    """Make the watched pair in ``container``'s network namespace and hand it to the
    session's proxy; False (and a line in the proxy's log) when it cannot."""
    return finish(session, begin(engine, session, container))


def begin(engine: Any, session: Session, container: str) -> subprocess.Popen[bytes]:
    """The helper, started: it runs while the engine finishes the container's start (the
    proxy queues its hand-over until told the container's init), ~0.5 s that overlap."""
    token = secrets.token_hex(16)
    path = session.sandbox / TOKEN
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(token + "\n")
    return subprocess.Popen(argv(engine, session, container), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, ENV: token})


def finish(session: Session, helper: subprocess.Popen[bytes]) -> bool:
    """Wait for the helper; False (and a line in the proxy's log) when it could not."""
    try:
        out, err = helper.communicate(timeout=TIMEOUT)
        said = out.decode(errors="replace").strip()
        errors = [line for line in err.decode(errors="replace").splitlines()
                  if line.strip() and "--help" not in line]   # docker's "Run '... --help'" last
        why = "" if helper.returncode == 0 and said == "ok" else \
            (said or (errors[-1] if errors else f"the helper exited {helper.returncode}"))
    except (OSError, subprocess.TimeoutExpired) as exc:
        helper.kill()
        helper.wait()
        why = str(exc)
    finally:
        (session.sandbox / TOKEN).unlink(missing_ok=True)
    if why:
        _say(session, why)
    return not why


def argv(engine: Any, session: Session, container: str) -> list[str]:
    """The helper: root in its own container, only the two network capabilities, the proxy's
    socket and the holder's code read-only, the token from the environment (not argv)."""
    return [engine.cli_path(), "run", "--rm", "--pull", "never", "--network", f"container:{container}",
            "--user", "0:0", "--cap-drop", "ALL", "--cap-add", "NET_ADMIN", "--cap-add", "NET_RAW",
            "--security-opt", "no-new-privileges", "-e", ENV,
            "-v", f"{session.sandbox / DIR}:{MOUNT}:ro", "-v", f"{HOLDER_DIR}:{CODE}:ro",
            engine.config["container.image"], "python3", "-I", CODE, "direct-attach"]
