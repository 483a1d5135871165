"""``workspace serve``: one resident process per user (per state root) answering the hooks.

One request per connection, on loopback: a header line ``WS1 TOKEN EVENT PID LENGTH``
(PID: the process holding the connection's other end, checked), then the hook's JSON. The
answer is the service's token on a line, then the hook's JSON answer, or ``FALLBACK`` when
the full Python hook is to answer instead, then a NUL (JSON holds none): the client reads
up to it, never waiting for the connection to close (a service stopped after its answer
was sent, before its close, would hold the call until the client's hook timeout). The hook's environment and
working directory are read from ``/proc/PID`` (the bash client waiting for the answer), and
the handlers of manager/claude run with them, one request at a time, as the hook would run
them: the same decisions, not a second copy of the logic.

What it serves is the per-call hot path only (a Bash call's PreToolUse and PostToolUse on a
session whose hot record is current); anything else (session start and end, the file
tools, a session to build) is ``FALLBACK``. It cannot commit, trust, change settings or turn
the sandbox off: there is no request for any of that.
"""

from __future__ import annotations

import contextlib
import fcntl
import hmac
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator

from manager.service import endpoint

SERVED = ("PreToolUse", "PostToolUse")
FALLBACK = b"FALLBACK"
HEADER_LIMIT = 512
PAYLOAD_LIMIT = 16 << 20
CLIENT_TIMEOUT = 2.0      # a client that stalls mid-request is dropped (it falls back itself)
TICK = 5.0                # how often an idle service looks whether it should go
CODE_CHECK = 1.0          # at most this often, after an answer or when idle: has the code on
                          # disk changed under us? (a walk of the package: not on a call's path)
WATCHDOG = 20             # seconds: a request stuck longer kills the service (SIGALRM's
                          # default), so that later calls are refused at connect and fall back


class Service:
    def __init__(self, root: str, idle: float) -> None:
        self.root = os.path.realpath(root)
        self.state = os.path.realpath(endpoint.directory())
        self.idle = idle
        self.client_token = endpoint.new_token()
        self.service_token = endpoint.new_token()
        self.stamp = code_stamp(self.root)
        self.checked = time.monotonic()
        self.last = time.monotonic()
        self.namespaces = _namespaces("self")
        self.stale = False
        self.children: set[int] = set()    # review commands running (service/commands.py)
        self.listening: socket.socket | None = None

    # -- the loop ------------------------------------------------------------------------------
    def run(self, sock: socket.socket) -> None:
        endpoint.write_pid()
        endpoint.write(sock.getsockname()[1], self.client_token, self.service_token)
        sock.settimeout(min(TICK, max(self.idle, 0.1)))
        self.listening = sock
        try:
            while not self.stale:
                self._reap()
                try:
                    conn, _ = sock.accept()
                except TimeoutError:
                    if self._should_go():
                        return
                    continue
                with conn:
                    self.last = time.monotonic()
                    conn.settimeout(CLIENT_TIMEOUT)
                    signal.alarm(WATCHDOG)
                    try:
                        self.serve(conn)
                    except OSError:
                        pass          # the client went away: it falls back on its own
                    finally:
                        signal.alarm(0)
                    self._code_changed()      # after the answer: off the call's path
        finally:
            endpoint.remove_if(self.client_token)

    def _reap(self) -> None:
        for pid in list(self.children):
            try:
                done = os.waitpid(pid, os.WNOHANG)[0]
            except ChildProcessError:
                done = pid
            if done:
                self.children.discard(pid)

    def _should_go(self) -> bool:
        found = endpoint.read()
        if found is None or found[1] != self.client_token:
            return True               # withdrawn or replaced (the state directory went)
        return time.monotonic() - self.last > self.idle or self._code_changed()

    def _code_changed(self) -> bool:
        now = time.monotonic()
        if now - self.checked >= CODE_CHECK:
            self.checked = now
            self.stale = code_stamp(self.root) != self.stamp
        return self.stale

    # -- one request -----------------------------------------------------------------------------
    def serve(self, conn: socket.socket) -> None:
        head, rest = _read_header(conn)
        words = head.split(b" ")
        if len(words) != 5 or words[0] != b"WS1" or not hmac.compare_digest(
                words[1], self.client_token.encode()):
            return                    # not a client of ours: no answer at all
        event, pid, length = words[2].decode("ascii", "replace"), words[3], words[4]
        if not (pid.isdigit() and length.isdigit()) or int(length) > PAYLOAD_LIMIT:
            return
        raw = rest + _read_exact(conn, int(length) - len(rest)) if int(length) > len(rest) \
            else rest[:int(length)]
        if event == "CLI":
            self.command(int(pid), raw, conn)
            return
        answer = self.answer(event, int(pid), raw, conn)
        conn.sendall(self.service_token.encode() + b"\n" + answer + b"\0")

    def answer(self, event: str, pid: int, raw: bytes, conn: socket.socket) -> bytes:
        if event not in SERVED or self.stale:
            return FALLBACK
        caller = _caller(pid, self.namespaces) if _connected_by(pid, conn) else None
        if caller is None:
            return FALLBACK
        env, cwd = caller
        if os.path.realpath(env.get("CLAUDE_PLUGIN_ROOT") or "/nonexistent") != self.root:
            return FALLBACK           # another release of the plugin: its own code answers
        with _environment(env):
            os.chdir(cwd)
            try:
                if os.path.realpath(endpoint.directory()) != self.state:
                    return FALLBACK   # another state root: its own service answers
                return _dispatch(event, raw)
            finally:
                os.chdir("/")

    # -- a review command (service/commands.py) ------------------------------------------------
    def command(self, pid: int, raw: bytes, conn: socket.socket) -> None:
        """Run a read-only review command of the CLI launcher's in a child; the child ends the
        answer with the exit status. ``FALLBACK`` when it is not run here."""
        from manager.service import commands

        token = self.service_token.encode() + b"\n"
        found = self._command_of(pid, raw, conn)
        if found is None:
            conn.sendall(token + FALLBACK + b"\0")
            return
        argv, env, cwd, umask, outs = found
        commands.prepare()
        sys.stdout.flush()
        sys.stderr.flush()
        conn.sendall(token)
        child = os.fork()
        if child == 0:
            self._child(conn, argv, env, cwd, umask, outs)
        self.children.add(child)
        for fd in outs:
            os.close(fd)

    def _command_of(self, pid: int, raw: bytes, conn: socket.socket
                    ) -> tuple[list[str], dict[str, str], str, int, tuple[int, int]] | None:
        from manager.service import commands

        caller = None if self.stale or not _connected_by(pid, conn) \
            else _caller(pid, self.namespaces)
        if caller is None:
            return None
        env, cwd = caller
        umask = commands.umask_of(pid)
        with _environment(env):
            state = os.path.realpath(endpoint.directory())
        if umask is None or state != self.state:
            return None
        found = commands.request(raw, self.root, pid)
        return None if found is None else (found[0], env, cwd, umask, found[1])

    def _child(self, conn: socket.socket, argv: list[str], env: dict[str, str], cwd: str,
               umask: int, outs: tuple[int, int]) -> None:
        from manager.service import commands

        status = 3
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            if self.listening is not None:
                self.listening.close()
            status = commands.run_child(argv, env, cwd, umask, outs, keep=conn.fileno())
        finally:
            with contextlib.suppress(OSError):
                conn.sendall(b"%d\0" % status)
            os._exit(status & 0xFF)


def _dispatch(event: str, raw: bytes) -> bytes:
    """The handler's answer; FALLBACK for anything it raises, so that the hook process gives
    the answer of record (its deny names the fix, as it always did): a failure here must not
    differ from one there, whatever in the service caused it."""
    from manager import fastjson
    from manager.claude import entry

    try:
        if not _hot(event, raw):
            return FALLBACK
        result = entry.dispatch(event, raw)
    except Exception:  # noqa: BLE001 - the hook process answers instead
        return FALLBACK
    return fastjson.dumps(result).encode() if result else b""


def _hot(event: str, raw: bytes) -> bool:
    """Whether the call is on the hot path: a Bash call of a session with a current hot record
    (a session to build starts engines: the hook process does that, not the service)."""
    from manager.claude import protocol
    from manager.claude import state
    from manager.session import paths

    payload = protocol.read_payload(raw)    # raises for a payload that is not JSON
    if payload.get("tool_name") != "Bash":
        return False
    if event != "PreToolUse":
        return True
    claude_id = payload.get("session_id")
    return paths.valid_id(claude_id) and \
        state.read_hot(state.resolve_session(claude_id)) is not None


# -- helpers ---------------------------------------------------------------------------------


def _read_header(conn: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\n" not in data:
        chunk = conn.recv(4096)
        if not chunk or len(data) > HEADER_LIMIT:
            raise ConnectionError("no header")
        data += chunk
    head, _, rest = data.partition(b"\n")
    return head, rest


def _read_exact(conn: socket.socket, size: int) -> bytes:
    parts, left = [], size
    while left > 0:
        chunk = conn.recv(min(left, 1 << 16))
        if not chunk:
            raise ConnectionError("short payload")
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _connected_by(pid: int, conn: socket.socket) -> bool:
    """Whether process ``pid`` holds the client end of ``conn``: loopback TCP has no
    SO_PEERCRED, so the connection is found in the host's socket table (the service's own
    network namespace) and its inode among the process's descriptors. A request cannot
    name another process than its own (a sandboxed one's own pid is not the host's)."""
    peer = f"0100007F:{conn.getpeername()[1]:04X}"
    local = f"0100007F:{conn.getsockname()[1]:04X}"
    inode = None
    with open("/proc/net/tcp", encoding="ascii") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 9 and fields[1] == peer and fields[2] == local:
                inode = fields[9]
                break
    if inode is None:
        return False
    link = f"socket:[{inode}]"
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == link
                   for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    """The client's environment in this process for a while (the state root it names, the
    handlers' settings), the service's own again after."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _namespaces(pid: str) -> tuple[str, str]:
    return os.readlink(f"/proc/{pid}/ns/mnt"), os.readlink(f"/proc/{pid}/ns/net")


def _caller(pid: int, namespaces: tuple[str, str]) -> tuple[dict[str, str], str] | None:
    """The client's environment and working directory, when it is a process of this user in
    the service's own mount and network namespaces (a sandboxed process is in neither)."""
    try:
        if os.stat(f"/proc/{pid}").st_uid != os.geteuid() or _namespaces(str(pid)) != namespaces:
            return None
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None
    env = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and name:
            env[os.fsdecode(name)] = os.fsdecode(value)
    return env, cwd


def code_stamp(root: str) -> list[tuple[str, int, int]]:
    """Every module of the package with its mtime and size: a service whose code changed on
    disk (an upgrade, a developer's edit) goes, and the next call starts the new code."""
    marks = []
    for top, dirs, files in os.walk(os.path.join(root, "manager")):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(top, name)
                st = os.stat(path)
                marks.append((path, st.st_mtime_ns, st.st_size))
    return sorted(marks)


def serve(root: str, idle: float) -> int:
    """Run the service until idle for ``idle`` seconds; 0 at once when one already runs."""
    lock = os.open(os.path.join(endpoint.ensure_directory(), endpoint.LOCK),
                   os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0                      # another one serves
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))   # withdraw the endpoint on the way out
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(4096)   # the kernel's cap: a hung service's queue fills late
        Service(root, idle).run(sock)
    return 0


def main(argv: list[str]) -> int:
    """``python -m manager.service.server ROOT [IDLE]`` (what the hook's client starts)."""
    from manager.session import paths

    paths.enable_site()
    root = argv[0] if argv else os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    idle = float(argv[1]) if len(argv) > 1 else float(os.environ.get("WORKSPACE_SERVICE_IDLE")
                                                      or 1800)
    os.chdir("/")
    return serve(root, idle)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
