"""The per-session egress proxy (stdlib only: the holder imports it).

With ``network`` a list of hosts the sandbox has a network namespace of its own with
only loopback up: no route out. The proxy is a process of the host's namespaces, forked
by the holder before it made its own (:func:`start`); once it has, the holder makes the
listeners on 127.0.0.1:PORT inside and hands them over (SCM_RIGHTS on a socket pair: no
path another process could connect to). What the proxy accepts on them comes from the
sandbox; what it connects to is reached from the host. It reads one HTTP request
(CONNECT host:port, or a plain request with an absolute URL), or a SOCKS5 CONNECT
(:mod:`.socks`, on the same port), checks host and port
against the list, and either relays the connection to that one host or answers 403.
Each attempt, allowed or refused, becomes a JSON line in the sandbox's ``egress.jsonl``
with the call that made it, written when it is decided: a refusal is one line, an allowed
connection an ``open`` line then a ``close`` line with its bytes (:mod:`.live`), so a tunnel
held open is on the record while it lasts, and a proxy that stops closes what it holds.
At most :data:`.live.LIMIT` connections are served at once; more are refused at once and
counted on the record: what the sandbox may make the host's proxy hold is bounded. With
``network`` off or a list, the proxy also reads the namespace's watched way out
(:mod:`.direct`): connections made around the proxy are refused at once and recorded too
(the lookups of their calls on one worker thread: :meth:`.live.Live.later`).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time

from . import live
from . import socks
from .allowlist import allowed
from .strays import parent_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    import selectors
    from collections.abc import Callable

    from .direct import Limiter
    from .direct import Watcher

POLICY = "network.json"      # {"mode": "open"|"off"|"list", "allow": [...]}, by the launcher
RECORD = "egress.jsonl"
STATE = "network"            # "off" or "proxy PORT": read by the entry script for the env
PORT = 3128                  # inside the sandbox's own network namespace: no other user
HEAD_LIMIT = 64 << 10
HEAD_TIMEOUT = 10.0         # for the request head: a client sends it at once
CONNECT_TIMEOUT = 10.0
CHUNK = 1 << 16
# The overlay entry script, by the names it has had (engines/overlay/enter.sh in the package layout).
ENTER_SCRIPTS = (b"/overlay_enter.sh", b"/overlay/enter.sh")


def read_policy(sandbox: str) -> dict[str, object]:
    try:
        with open(os.path.join(sandbox, POLICY), encoding="utf-8") as f:
            policy = json.load(f)
    except FileNotFoundError:
        return {"mode": "open", "allow": []}
    if not isinstance(policy, dict) or policy.get("mode") not in ("open", "off", "list"):
        raise RuntimeError(f"{POLICY}: not a network policy")
    return policy


# -- the holder's side: loopback, the proxy process, its listeners ---------------------------

def loopback_up() -> None:
    """Bring ``lo`` up in this (new) network namespace: a sandbox's own servers work."""
    import fcntl
    import struct

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, siocgifflags, request))[1]
        fcntl.ioctl(s, siocsifflags, struct.pack("16sH22x", b"lo", flags | iff_up))


def start(sandbox: str, allow: list[str]) -> socket.socket:
    """Fork the proxy (twice: it is nobody's child here, so the holder's first child stays
    the session's init); the holder's end of the channel. The proxy ends when it closes."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        try:
            mine.close()
            if os.fork() == 0:
                _proxy_main(sandbox, allow, theirs, os.getppid())
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    theirs.close()
    return mine


def _proxy_main(sandbox: str, allow: list[str], channel: socket.socket, _: int) -> None:
    # Nothing of the holder's but its log (stderr): its stdout is the launcher's pipe, which
    # must see end-of-file when the holder exits.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    keep = channel.fileno()
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 16)
    os.setsid()
    proxy = Proxy(sandbox, allow)
    try:
        live.on_term()
        proxy.serve(channel)
    finally:
        proxy.live.close_all("the proxy stopped")


def listen() -> list[socket.socket]:
    """Listeners on 127.0.0.1:PORT (and [::1]:PORT) in this, the sandbox's, namespace. The
    proxy accepts on them: connections it accepts are the sandbox's, those it makes the
    host's. (No thread in the holder: after unshare(CLONE_NEWPID) it can start none.)"""
    listeners = []
    for family, address in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            s = socket.socket(family, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((address, PORT))
            s.listen(128)
            listeners.append(s)
        except OSError:
            continue   # no IPv6 in this kernel: IPv4 only
    if not listeners:
        raise RuntimeError(f"cannot listen on 127.0.0.1:{PORT} in the sandbox")
    return listeners


class HolderNetwork:
    """What the holder does for ``network``: read the launcher's policy, fork the proxy
    (a list) before making its namespaces, ask for a network namespace of its own (off,
    a list), bring loopback up in it and give the proxy its listeners there; say how calls
    reach it."""

    def __init__(self, sandbox: str) -> None:
        policy = read_policy(sandbox)
        self.mode = str(policy["mode"])
        allow = policy.get("allow")
        self.allow = [str(a) for a in allow] if isinstance(allow, list) else []
        self.channel = start(sandbox, self.allow) if self.isolated else None

    @property
    def isolated(self) -> bool:
        return self.mode != "open"

    def inside(self, log: list[str]) -> None:
        """In the new namespaces, as their root: loopback, the proxy's listeners (a list)
        and the watched way out (both), handed to the proxy."""
        if self.channel is None:
            return
        from . import direct
        from . import dns

        loopback_up()
        listeners = listen() if self.mode == "list" else []
        resolvers = dns.listen(dns.loopback_nameservers())
        try:
            watched = [direct.setup()]
        except OSError as exc:
            watched = []
            log.append(f"network: direct connections are refused but not recorded ({exc})")
        message = os.getpid().to_bytes(4, "little") + bytes([len(listeners), len(resolvers)])
        handed = (*listeners, *resolvers, *watched)
        socket.send_fds(self.channel, [message], [s.fileno() for s in handed])
        for s in handed:
            s.close()

    def serve(self, session_fd: int) -> None:
        """After the pivot: the state file the entry script reads."""
        state = {"open": "", "off": "off\n", "list": f"proxy {PORT}\n"}[self.mode]
        fd = os.open(STATE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644,
                     dir_fd=session_fd)
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(state)


# -- the proxy --------------------------------------------------------------------------

class Proxy:
    def __init__(self, sandbox: str, allow: list[str]) -> None:
        self.sandbox = sandbox
        self.allow = allow
        self.lock = threading.Lock()
        self.live = live.Live(self.record, sandbox)

    def serve(self, channel: socket.socket) -> None:
        """Take the listeners the holder made in the sandbox's namespace, then accept on
        them until the channel closes (the holder is gone)."""
        import selectors

        from .direct import Limiter
        from .direct import Watcher

        data, fds, _, _ = socket.recv_fds(channel, 6, 16)
        if len(data) != 6:
            return
        holder, count, resolvers = int.from_bytes(data[:4], "little"), data[4], data[5]
        limiter = Limiter()
        rest = fds[count + resolvers:]
        watcher = Watcher(socket.socket(fileno=rest[0]), limiter) if rest else None
        dns_socks = {fd: socket.socket(fileno=fd) for fd in fds[count:count + resolvers]}
        with selectors.DefaultSelector() as sel:
            sel.register(channel, selectors.EVENT_READ)
            for fd in fds[:count]:
                sel.register(socket.socket(fileno=fd), selectors.EVENT_READ)
            for sock in (*dns_socks.values(), *([watcher.sock] if watcher else [])):
                sel.register(sock, selectors.EVENT_READ)
            while True:
                for key, _ in sel.select():
                    if key.fileobj is channel:
                        if not channel.recv(1):
                            return
                        continue
                    if watcher is not None and key.fileobj is watcher.sock:
                        self.watched(watcher, holder)
                        continue
                    if key.fd in dns_socks:
                        self.resolver(dns_socks[key.fd], limiter, holder)
                        continue
                    listener: socket.socket = key.fileobj  # type: ignore[assignment]
                    with contextlib.suppress(OSError):
                        conn, _ = listener.accept()
                        self.live.serve(conn, self.handle, holder)

    def watched(self, watcher: Watcher, holder: int) -> bool:
        """A direct attempt: refused at once, recorded (once) with its call, found first
        (the refusal ends the socket that tells it). False when the socket failed."""
        try:
            read = watcher.read()
        except OSError:
            return False
        if read is None:
            return True
        attempt, record = read
        if not record:
            watcher.refuse(attempt)
            return True

        def run() -> None:
            entry = attempt.entry()
            entry["call"] = self.direct_call(holder, str(entry["proto"]), attempt.sport,
                                             attempt.dport)
            watcher.refuse(attempt)
            self.record(entry)

        self.live.later(run)
        return True

    def direct_call(self, holder: int, proto: str, local: int, remote: int) -> str:
        return direct_caller(holder, proto, local, remote)

    def resolver(self, sock: socket.socket, limiter: Limiter, holder: int) -> None:
        """A query to a loopback nameserver (:mod:`.dns`): recorded once, answered REFUSED."""
        from . import dns

        try:
            query, peer = sock.recvfrom(1 << 16)
        except OSError:
            return
        name, _ = dns.question(query)
        answer_ = dns.refusal(query)
        if not limiter.new(("dns", sock.getsockname()[0], name)):   # one lookup: A, AAAA, retries
            if answer_:
                with contextlib.suppress(OSError):
                    sock.sendto(answer_, peer)
            return
        here = sock.getsockname()

        def run() -> None:
            entry: dict[str, object] = {
                "time": round(time.time(), 3), "host": here[0], "port": 53, "proto": "udp",
                "via": "direct", "allowed": False, "up": len(query), "down": 0,
                "call": direct_caller(holder, "udp", peer[1], 0)}
            if name:
                entry["query"] = name
            if answer_:
                with contextlib.suppress(OSError):
                    sock.sendto(answer_, peer)
            self.record(entry)

        self.live.later(run)

    def handle(self, conn: socket.socket, holder: int, call: str | None = None) -> None:
        """One connection; ``call`` when the caller found it already (the container
        engines' proxy, :mod:`.unix_proxy`)."""
        entry: dict[str, object] = {"time": round(time.time(), 3),
                                    "call": caller(conn, holder) if call is None else call}
        started = time.monotonic()
        with conn:
            try:
                self.exchange(conn, entry)
            except OSError as exc:
                entry.setdefault("error", exc.strerror or str(exc))
            entry["seconds"] = round(time.monotonic() - started, 3)
            if "host" in entry:
                self.live.done(entry)

    def exchange(self, conn: socket.socket, entry: dict[str, object]) -> None:
        conn.settimeout(HEAD_TIMEOUT)
        if conn.recv(1, socket.MSG_PEEK) == bytes([socks.VERSION]):
            self.exchange_socks(conn, entry)
            return
        head, rest = read_head(conn)
        self.live.head_read(conn)
        request = parse_request(head)
        if request is None:
            conn.sendall(answer(400, "workspace: the proxy takes CONNECT or an absolute http:// URL\n"))
            return
        method, host, port, head = request
        entry.update(method=method, host=host, port=port, up=0, down=0)
        if not allowed(self.allow, host, port):
            entry["allowed"] = False
            conn.sendall(answer(403, f"workspace: {host}:{port} is not in this session's network "
                                     "allow list (setting `network`)\n"))
            return
        entry["allowed"] = True
        tally = self.live.opened(entry)
        try:
            upstream = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT)
        except OSError as exc:
            entry["error"] = exc.strerror or str(exc)
            conn.sendall(answer(502, f"workspace: cannot reach {host}:{port}: {entry['error']}\n"))
            return
        with upstream:
            conn.settimeout(None)
            upstream.settimeout(None)
            if method == "CONNECT":
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                rest = head + rest
            if rest:
                upstream.sendall(rest)
                tally[0] += len(rest)
            relay(conn, upstream, tally)
            entry.update(up=tally[0], down=tally[1])

    def exchange_socks(self, conn: socket.socket, entry: dict[str, object]) -> None:
        request = socks.request(conn)
        self.live.head_read(conn)
        if request is None:
            return
        command, host, port = request
        entry.update(method="SOCKS5", host=host, port=port, up=0, down=0, allowed=False)
        if command != socks.CONNECT:
            entry["error"] = f"SOCKS5 command {command}: only CONNECT is taken"
            conn.sendall(socks.reply(socks.COMMAND_NOT_SUPPORTED))
            return
        if not allowed(self.allow, host, port):
            conn.sendall(socks.reply(socks.NOT_ALLOWED))
            return
        entry["allowed"] = True
        tally = self.live.opened(entry)
        try:
            upstream = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT)
        except OSError as exc:
            entry["error"] = exc.strerror or str(exc)
            conn.sendall(socks.reply(socks.failure(exc)))
            return
        with upstream:
            conn.sendall(socks.reply(socks.OK))
            conn.settimeout(None)
            upstream.settimeout(None)
            relay(conn, upstream, tally)
            entry.update(up=tally[0], down=tally[1])

    def record(self, entry: dict[str, object]) -> None:
        line = (json.dumps(entry, sort_keys=True) + "\n").encode()
        with self.lock:
            fd = os.open(os.path.join(self.sandbox, RECORD),
                         os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)


def read_head(conn: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > HEAD_LIMIT:
            raise OSError("request head too long")
        chunk = conn.recv(CHUNK)
        if not chunk:
            break
        data += chunk
    head, sep, rest = data.partition(b"\r\n\r\n")
    return head + sep, rest


def parse_request(head: bytes) -> tuple[str, str, int, bytes] | None:
    """(method, host, port, the head to send upstream), or None. A plain request is sent
    on in origin form without the proxy's own headers."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        return None
    method, target, version = parts
    if method == "CONNECT":
        host, port = split_host(target, 443)
        return (method, host, port, b"") if host else None
    if not target.lower().startswith("http://"):
        return None
    authority, slash, path = target[7:].partition("/")
    host, port = split_host(authority.rpartition("@")[2], 80)
    if not host:
        return None
    kept = [h for h in lines[1:] if h and not h.lower().startswith(("proxy-", "connection:"))]
    out = [f"{method} {slash}{path} {version}", *kept, "Connection: close", "", ""]
    return method, host, port, "\r\n".join(out).encode("latin-1")


def split_host(authority: str, default: int) -> tuple[str, int]:
    if authority.startswith("["):
        host, _, tail = authority[1:].partition("]")
        port_text = tail.removeprefix(":")
    else:
        host, _, port_text = authority.partition(":")
    try:
        port = int(port_text) if port_text else default
    except ValueError:
        return "", 0
    return (host.lower(), port) if host and 0 < port < 65536 else ("", 0)


def answer(status: int, text: str) -> bytes:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = text.encode()
    return (f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}"
            "\r\nConnection: close\r\n\r\n").encode() + body


def relay(client: socket.socket, upstream: socket.socket, tally: list[int] | None = None) -> tuple[int, int]:
    """Copy both ways until both sides are done; (bytes up, bytes down), also added to
    ``tally`` as they pass (what a proxy that stops records of a connection it holds)."""
    import selectors

    tally = [0, 0] if tally is None else tally
    start = tally[:]
    index = {client: 0, upstream: 1}
    other = {client: upstream, upstream: client}
    with selectors.DefaultSelector() as sel:
        for s in (client, upstream):
            sel.register(s, selectors.EVENT_READ)
        while sel.get_map() and _pass(sel, other, index, tally):
            pass
    return tally[0] - start[0], tally[1] - start[1]


def _pass(sel: selectors.BaseSelector, other: dict[socket.socket, socket.socket],
          index: dict[socket.socket, int], tally: list[int]) -> bool:
    """One wait's worth of copying; False when a side cannot be written (the end)."""
    for key, _ in sel.select():
        src: socket.socket = key.fileobj  # type: ignore[assignment]
        try:
            data = src.recv(CHUNK)
        except OSError:
            data = b""
        if data:
            try:
                other[src].sendall(data)
            except OSError:
                return False
            tally[index[src]] += len(data)
            continue
        sel.unregister(src)
        with contextlib.suppress(OSError):
            other[src].shutdown(socket.SHUT_WR)
    return True


# -- which call made a connection -------------------------------------------------------

def caller(conn: socket.socket, holder: int) -> str:
    """The call id of the process that opened ``conn`` (its ancestors include the entry
    script run with the call's report file, calls/ID.cwd), "" when it cannot be told
    (a command left running after its call, a `workspace run`). Its ancestry, not its
    environment: a command cannot claim another call's id."""
    try:
        port = conn.getpeername()[1]
        inode = _socket_inode(holder, ("tcp", "tcp6"), port, PORT)
        pid = _owner(holder, inode) if inode else None
    except OSError:
        return ""
    return _call_above(pid, holder)


def direct_caller(holder: int, proto: str, local: int, remote: int) -> str:
    """The call of a direct attempt's socket (``proto`` tcp or udp, its local port); ""
    when it is gone already (a datagram sent by a command that has ended)."""
    try:
        inode = _socket_inode(holder, (proto, proto + "6"), local, remote if proto == "tcp" else None)
        pid = _owner(holder, inode) if inode else None
    except OSError:
        return ""
    return _call_above(pid, holder)


def _call_above(pid: int | None, holder: int) -> str:
    """The call of the entry script above ``pid``. Only a process of the holder's own pid
    namespace (the host's) is read as one: every sandboxed process is in the session's
    namespace or below it, so none of them can pose as the entry script with its argv."""
    try:
        host = os.readlink(f"/proc/{holder}/ns/pid")
    except OSError:
        return ""
    while pid is not None and pid > 1:
        call = _call_of(pid) if _pid_namespace(pid) == host else None
        if call is not None:
            return call
        pid = parent_of(pid)
    return ""


def _pid_namespace(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


def _socket_inode(holder: int, tables: tuple[str, ...], port: int, remote_port: int | None) -> str:
    """The inode of the socket of local port ``port`` (to ``remote_port``) in the holder's
    namespace."""
    for table in tables:
        with contextlib.suppress(OSError), open(f"/proc/{holder}/net/{table}", encoding="ascii") as f:
            next(f, None)
            for line in f:
                fields = line.split()
                local, remote = fields[1].rsplit(":", 1)[1], fields[2].rsplit(":", 1)[1]
                if int(local, 16) == port and remote_port in (None, int(remote, 16)):
                    return fields[9]
    return ""


def _owner(holder: int, inode: str) -> int | None:
    netns = os.readlink(f"/proc/{holder}/ns/net")
    return fd_holder(inode, lambda pid: os.readlink(f"/proc/{pid}/ns/net") == netns)


def fd_holder(inode: str, looked_into: Callable[[int], bool]) -> int | None:
    """The process holding socket ``inode`` among those ``looked_into`` says to search (an
    OSError from it, or from the process's descriptors, passes over that process)."""
    target = f"socket:[{inode}]"
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if not looked_into(int(entry)):
                continue
            for fd in os.listdir(f"/proc/{entry}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{entry}/fd/{fd}") == target:
                        return int(entry)
        except OSError:
            continue
    return None


def _call_of(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return None
    if len(argv) > 6 and argv[1].endswith(ENTER_SCRIPTS):
        out = os.path.basename(argv[6].decode(errors="replace"))
        return out.removesuffix(".cwd") if out.endswith(".cwd") else ""
    return None
