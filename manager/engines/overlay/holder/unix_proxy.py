"""The container engines' egress proxy (issue 24): the overlay engine's :class:`.Proxy` (the
allow list, HTTP CONNECT, plain HTTP, SOCKS5, the egress record) served on a unix socket.

A container session with ``network`` a list runs with ``--network none``; this process runs
on the host, as the caller, for the container's lifetime (it watches the container's init
through a pidfd and ends with it). It listens on ``SANDBOX/egress/proxy.sock``, whose
directory the container mounts read-only at ``/run/ws-egress``; the forwarder inside
(:mod:`.forwarder`) relays 127.0.0.1:3128 to it. Whatever connects (the forwarder, or a
sandboxed process directly) reaches only this proxy, which connects only to listed hosts.

The call behind a connection is found on the host, from the process's ancestry, and the
kernel names the process: the unix peer (SO_PEERCRED, a pid in this, the host's, pid
namespace). Only when that peer is the forwarder is its first line (``WSFWD PORT``) taken:
the client's port, whose socket in the container's own TCP table names the process. The
forwarder is the peer that said hello (``WSFWD ready``) while the engine waited for it,
before any call could run: its pid is kept in ``SANDBOX/egress.forwarder`` for a proxy
started again (``--restart``). Anyone else's ``WSFWD`` line is read and ignored: the
attempt is its own (a forged port cannot make it no one's, or another's). Then
the process's topmost ancestor in the container's pid namespace, which for a call is the
``ws-exec --id ID`` the entry script exec'd; ``running/ID`` (host-written) names that entry
script, whose report file names the call.

Run as ``python -I .../engines/overlay egress-proxy SANDBOX [--restart]``: it binds, says
``bound``, reads the container init's host pid on stdin, waits for the forwarder's hello
(not with ``--restart``: the forwarder runs already) and says ``ready`` (or ``error: why``).
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import socket
import sys
import threading
import time

from . import direct_attach
from . import egress_proxy
from . import live
from .egress_proxy import Proxy
from .strays import parent_of

DIR = "egress"             # SANDBOX/egress/, mounted read-only at MOUNT in the container
MOUNT = "/run/ws-egress"
SOCKET = "proxy.sock"
FORWARDER = "egress.forwarder"   # SANDBOX/: "PID START" of the forwarder, as this proxy sees it
PREAMBLE = b"WSFWD "       # the forwarder's first line: "WSFWD PORT" or "WSFWD ready"
HELLO_TIMEOUT = 60.0
# The container engines' entry script, by the names it has had; argv[8] is its report file.
ENTER_SCRIPTS = (b"/container/enter.sh", b"/container_enter.sh")
_CALL_ID = re.compile(rb"^[A-Za-z0-9._-]{1,200}$")


class ContainerProxy(Proxy):
    def __init__(self, sandbox: str, allow: list[str], init: int, hello: bool = True) -> None:
        super().__init__(sandbox, allow)
        self.init = init
        self.depth = ns_depth(init)
        self.ready = threading.Event()
        self.forwarder = 0 if hello else known_forwarder(sandbox)

    def handle(self, conn: socket.socket, holder: int, call: str | None = None) -> None:
        try:
            conn.settimeout(egress_proxy.HEAD_TIMEOUT)
            peer = peer_pid(conn)
            if direct_attach.offered(conn):
                with conn:
                    self.take_watcher(direct_attach.receive(conn, self.sandbox))
                return
            word = preamble(conn)
        except OSError:
            conn.close()
            return
        if word == b"ready":
            if not self.forwarder and peer is not None and ns_depth(peer) == self.depth:
                self.forwarder = peer
                keep_forwarder(self.sandbox, peer)
                self.ready.set()
            conn.close()
            return
        if peer != self.forwarder or not self.forwarder:   # not the forwarder: no one's word
            word = None
        port = int(word) if word is not None and word.isdigit() else None
        super().handle(conn, holder, self.call(peer, port))

    def take_watcher(self, sock: socket.socket | None) -> None:
        """The container's watched end (:mod:`.direct_attach`): read until it fails."""
        if sock is None:
            return
        from .direct import Limiter
        from .direct import Watcher

        watcher = Watcher(sock, Limiter())

        def run() -> None:
            while self.watched(watcher, self.init):
                pass

        threading.Thread(target=run, daemon=True).start()

    def direct_call(self, holder: int, proto: str, local: int, remote: int) -> str:
        """A direct attempt's call: its socket in the container's table, its process found
        as :meth:`call` finds the forwarder's client."""
        try:
            inode = egress_proxy._socket_inode(self.init, (proto, proto + "6"), local,
                                               remote if proto == "tcp" else None)
            return self.call_above(owner(inode, self.depth) if inode else None)
        except OSError:
            return ""

    def call(self, peer: int | None, port: int | None) -> str:
        """The call of the forwarder's client on ``port``, else of the peer itself."""
        try:
            if port is None:
                pid = peer
            else:
                inode = egress_proxy._socket_inode(self.init, ("tcp", "tcp6"), port, egress_proxy.PORT)
                pid = owner(inode, self.depth) if inode else None
            return self.call_above(pid)
        except OSError:
            return ""

    def call_above(self, pid: int | None) -> str:
        """The call of ``pid``'s topmost ancestor in the container's pid namespace."""
        top = None
        while pid is not None and pid > 1:
            depth = ns_depth(pid)
            if depth < self.depth:
                break
            if depth == self.depth:
                top = pid
            pid = parent_of(pid)
        return self.call_of_exec(top) if top is not None else ""

    def call_of_exec(self, pid: int) -> str:
        argv = cmdline(pid)
        if len(argv) < 4 or not argv[1].endswith(b"/ws-exec") or argv[2] != b"--id" \
                or not _CALL_ID.match(argv[3]):
            return ""   # not a call's exec: the init's (a command left running), or another
        try:
            with open(os.path.join(self.sandbox, "running", argv[3].decode()), encoding="ascii") as f:
                entry, start = f.read().split()[:2]
        except (OSError, ValueError):
            return ""
        if _start_time(int(entry)) != start:
            return ""
        argv = cmdline(int(entry))
        if len(argv) < 9 or not argv[1].endswith(ENTER_SCRIPTS):
            return ""
        out = os.path.basename(argv[8].decode(errors="replace"))
        return out.removesuffix(".cwd") if out.endswith(".cwd") else ""

    def serve_unix(self, listener: socket.socket, pidfd: int, hello: bool) -> str | None:
        """Accept until the container's init ends; None, or why it never got ready."""
        deadline = time.monotonic() + HELLO_TIMEOUT
        said = not hello
        if said:
            _say("ready")
        with selectors.DefaultSelector() as sel:
            sel.register(listener, selectors.EVENT_READ)
            sel.register(pidfd, selectors.EVENT_READ)
            while True:
                for key, _ in sel.select(timeout=0.2 if not said else None):
                    if key.fileobj == pidfd:
                        return None if said else ("the container ended before its network "
                                                  "forwarder listened (the image needs python3)")
                    with contextlib.suppress(OSError):
                        conn, _ = listener.accept()
                        self.live.serve(conn, self.handle, self.init)
                if not said and self.ready.is_set():
                    said = True
                    _say("ready")
                elif not said and time.monotonic() > deadline:
                    return f"no word from the container's network forwarder in {HELLO_TIMEOUT:g} s"


def preamble(conn: socket.socket) -> bytes | None:
    """The forwarder's word ("ready" or the client's port), consumed; None when the peer
    went straight to HTTP or SOCKS (a process that connected to the socket itself). Whose
    word it is, the caller asks the kernel."""
    head = conn.recv(64, socket.MSG_PEEK)
    if not head.startswith(PREAMBLE) or b"\n" not in head:
        return None
    line = conn.recv(head.index(b"\n") + 1)
    return line[len(PREAMBLE):].strip()


def keep_forwarder(sandbox: str, pid: int) -> None:
    path = os.path.join(sandbox, FORWARDER)
    with contextlib.suppress(OSError), open(path + ".tmp", "w", encoding="ascii") as f:
        f.write(f"{pid} {_start_time(pid)}\n")
    with contextlib.suppress(OSError):
        os.replace(path + ".tmp", path)


def known_forwarder(sandbox: str) -> int:
    """The forwarder an earlier proxy of this container met, if it still runs; else 0 (no
    one's ``WSFWD`` is taken: each connection is its peer's)."""
    try:
        with open(os.path.join(sandbox, FORWARDER), encoding="ascii") as f:
            pid, start = f.read().split()[:2]
    except (OSError, ValueError):
        return 0
    return int(pid) if pid.isdigit() and _start_time(int(pid)) == start else 0


def peer_pid(conn: socket.socket) -> int | None:
    import struct

    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid = struct.unpack("3i", creds)[0]
    return pid or None


def owner(inode: str, depth: int) -> int | None:
    """The process holding socket ``inode`` (unique on the host), among those at least
    ``depth`` pid namespaces deep (the host's own, with their many descriptors, skipped:
    ~7x faster here) that we may look into."""
    return egress_proxy.fd_holder(inode, lambda pid: ns_depth(pid) >= depth)


def ns_depth(pid: int) -> int:
    """How many pid namespaces deep ``pid`` is (NSpid's fields; world-readable), 0 if gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return len(line.split()) - 1
    except OSError:
        pass
    return 0


def cmdline(pid: int) -> list[bytes]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return ""


def _say(line: str) -> None:
    with contextlib.suppress(OSError):
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def bind(sandbox: str) -> socket.socket:
    where = os.path.join(sandbox, DIR)
    os.makedirs(where, exist_ok=True)
    os.chmod(where, 0o755)
    os.chdir(where)   # a sandbox's path can be longer than a socket address takes (108)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(SOCKET)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(SOCKET)
    os.chmod(SOCKET, 0o666)   # every uid in the container is the sandbox's
    listener.listen(128)
    return listener


def main(argv: list[str]) -> int:
    sandbox, hello = argv[0], "--restart" not in argv[1:]
    try:
        policy = egress_proxy.read_policy(sandbox)
        allow = policy.get("allow")
        listener = bind(sandbox)
    except (OSError, RuntimeError) as exc:
        _say(f"error: {exc}")
        return 1
    _say("bound")
    line = sys.stdin.readline().strip()
    if not line.isdigit() or int(line) <= 1:
        _say("error: no container pid")
        return 1
    try:
        pidfd = os.pidfd_open(int(line))
    except OSError as exc:
        _say(f"error: the container's init: {exc}")
        return 1
    allowed = [str(a) for a in allow] if isinstance(allow, list) else []
    proxy = ContainerProxy(sandbox, allowed, int(line), hello)
    try:
        live.on_term()
        why = proxy.serve_unix(listener, pidfd, hello)
    finally:
        proxy.live.close_all("the proxy stopped")
    if why:
        _say(f"error: {why}")
        return 1
    return 0
