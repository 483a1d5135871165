"""The container engines' direct attempts (issue 24): the watched pair of :mod:`.direct` in a
session container's network namespace, its packet socket handed to the host's proxy.

The session container never holds CAP_NET_ADMIN, so the pair is made by a one-shot helper
container that joins its network namespace with NET_ADMIN and NET_RAW only
(``container/direct.py`` starts it, from workspace's own image, never the session's): it
runs :func:`main`, which makes the pair (or finds it made: a proxy started again), connects
to the proxy's socket (mounted at ``/run/ws-egress``) and sends ``WSFWD direct TOKEN`` with
the packet socket (SCM_RIGHTS), then exits. The token is the engine's word for this one
hand-over (``SANDBOX/egress.direct``, the caller's only, never mounted): a process in the
session container, which reaches the same socket, cannot hand the proxy a socket of its own.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import socket

WORD = b"WSFWD direct "
TOKEN = "egress.direct"         # SANDBOX/: the one-time token (the engine writes it, 0600)
ENV = "WS_DIRECT_TOKEN"
SOCKET_PATH = "/run/ws-egress/proxy.sock"


def main() -> int:
    """In the helper container: the pair, then the hand-over; prints ``ok`` or why not."""
    from . import direct

    try:
        watcher = direct.setup()
        # Bound before the pair was up: the socket's pending ENETDOWN, not the proxy's to read.
        watcher.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(20)
            conn.connect(SOCKET_PATH)
            socket.send_fds(conn, [WORD + os.environ.get(ENV, "").encode() + b"\n"],
                            [watcher.fileno()])
            reply = conn.recv(200).decode(errors="replace").strip()
    except OSError as exc:
        reply = f"error: {exc}"
    print(reply or "error: no answer from the proxy", flush=True)
    return 0 if reply == "ok" else 1


def offered(conn: socket.socket) -> bool:
    """Whether the peer's first words are a hand-over (peeked: its socket stays queued)."""
    return conn.recv(len(WORD), socket.MSG_PEEK) == WORD


def receive(conn: socket.socket, sandbox: str) -> socket.socket | None:
    """The packet socket a hand-over carries, if its token is the engine's (used up then);
    answers ``ok`` or why not."""
    message, fds, _, _ = socket.recv_fds(conn, 256, 1)
    # Every descriptor passed is ours to close, whatever it is (a pipe's end is no socket:
    # made into one first, it leaked, one a connection; attack pass 9).
    taken: socket.socket | None = None
    try:
        why = _refusal(message, fds, sandbox)
        taken = None if why else socket.socket(fileno=fds[0])
    except OSError as exc:
        why, taken = f"cannot take it: {exc.strerror or exc}", None
    finally:
        for fd in fds[0 if taken is None else 1:]:
            with contextlib.suppress(OSError):
                os.close(fd)
    with contextlib.suppress(OSError):
        conn.sendall((why or "ok").encode() + b"\n")
    return taken


def _refusal(message: bytes, fds: list[int], sandbox: str) -> str:
    """Why the hand-over is not taken ("" when it is): the engine's token (used up then),
    and one packet socket."""
    token = message[len(WORD):].strip()
    path = os.path.join(sandbox, TOKEN)
    try:
        with open(path, "rb") as f:
            expected = f.read().strip()
    except OSError:
        return "a wrong token"
    if not expected or not hmac.compare_digest(expected, token):
        return "a wrong token"
    os.unlink(path)
    if len(fds) != 1 or os.fstat(fds[0]).st_mode & 0o170000 != 0o140000 or \
            _family(fds[0]) != socket.AF_PACKET:
        return "no packet socket"
    return ""


def _family(fd: int) -> int:
    """The socket's family, read without making an object that would own ``fd``."""
    with socket.socket(fileno=os.dup(fd)) as probe:
        return probe.family
