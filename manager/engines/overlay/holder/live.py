"""The egress proxy's connections while they last (issue 24; stdlib only: the holder's).

Two rules live here. **Record at connect, complete at close**: an allowed connection is put
on the record when it is decided (an ``open`` line: host, port, call, time, a ``conn`` id)
and completed when it ends (a ``close`` line with the same id: bytes, seconds, error); a
refusal is complete at once (one line). The reader (manager/egress/record.py) merges them
and shows an attempt with no close as open. A proxy that stops (its container ended, SIGTERM
from commit or discard, its holder gone) writes the closes of what it still holds, with the
bytes so far; one killed outright cannot, so each proxy holds a lock on its own file in
``SANDBOX/egress.live/`` (named by the prefix of its connections' ids) while it runs: the
reader shows an open attempt whose proxy holds no lock as ended.
**The sandbox's limits bound its cost on the host**: at most :data:`LIMIT`
connections are served at once, each by a thread. One more closes the oldest of them and
waits for its slot (at most :data:`WAITING` wait at once, each at most
:data:`WAIT_SECONDS`): connections held open, idle or not, cannot keep a later attempt off
the record (attack pass 9). Past the waiting room, a connection is closed at once and counted
on the record (``via: limit``, one line per burst), as is one whose thread cannot start
(RuntimeError at the user's thread limit: the proxy goes on). A refused direct attempt or
DNS query (whose call is looked up in /proc before its refusal) is a job for one worker
thread, :data:`BACKLOG` jobs deep; past that, the reader does the job itself, so a flood
slows only the flooder's own refusals and never grows the proxy. A connection has
:data:`HEAD_SECONDS` for its whole request head, however it trickles in (a byte every 9 s
held a slot for ever, and 64 of them every slot: later attempts were only counted); one
reaper thread shuts down the ones past it.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import socket
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

LIVE_DIR = "egress.live"   # a lock per running proxy (manager/egress/record.py reads it)
LIMIT = 64            # connections served at once (a container's pids limit, say)
WAITING = 8           # over LIMIT: connections waiting for the slot of the oldest, closed for them
WAIT_SECONDS = 5.0    # for that slot
BACKLOG = 256         # refusals waiting for the worker
HEAD_SECONDS = 10.0   # for a connection's whole request head
SAY_EVERY = 1.0       # at most one over-the-limit line a second; the rest counted in it
CLOSE_FIELDS = ("up", "down", "seconds", "error")


class Live:
    def __init__(self, record: Callable[[dict[str, object]], None], sandbox: str | None = None) -> None:
        self.record = record
        self.lock = threading.Lock()
        self.slots = threading.BoundedSemaphore(LIMIT)
        self.waiting = threading.BoundedSemaphore(WAITING)
        self.served: dict[int, tuple[float, socket.socket]] = {}   # id: (since, conn)
        self.held: dict[str, tuple[dict[str, object], list[int], float]] = {}
        self.prefix = f"{os.getpid()}.{os.urandom(3).hex()}"
        self.count = 0
        self.refused = 0          # over the limit, not yet on the record
        self.said = 0.0
        self.jobs: queue.Queue[Callable[[], None]] = queue.Queue(BACKLOG)
        self.worker: threading.Thread | None = None
        self.alive = _hold_lock(sandbox, self.prefix) if sandbox is not None else None
        self.heads: dict[int, tuple[float, socket.socket]] = {}   # id: (deadline, conn)
        self.reaper: threading.Thread | None = None

    # -- the bound -----------------------------------------------------------------------

    def serve(self, conn: socket.socket, handle: Callable[..., None], *args: object) -> None:
        """``handle(conn, *args)`` on a thread of its own, if a slot is free or the oldest
        connection's can be had; else refuse."""
        waits = False
        if self.slots.acquire(blocking=False):
            self._served(conn)
        elif self.waiting.acquire(blocking=False):
            waits = True
            self._close_oldest()
        else:
            self.refuse(conn, f"too many connections at once (at most {LIMIT})")
            return
        try:
            threading.Thread(target=self._run, args=(handle, conn, waits, *args), daemon=True).start()
        except RuntimeError:   # the user's thread limit: this connection, not the proxy
            self._gone(conn)
            (self.waiting if waits else self.slots).release()
            self.refuse(conn, "too many connections (the proxy cannot start a thread)")

    def _run(self, handle: Callable[..., None], conn: socket.socket, waits: bool, *args: object) -> None:
        if waits:
            got = self.slots.acquire(timeout=WAIT_SECONDS)
            self.waiting.release()
            if not got:
                self.refuse(conn, f"too many connections at once (at most {LIMIT})")
                return
            self._served(conn)
        self._head_begins(conn)
        try:
            handle(conn, *args)
        finally:
            self._gone(conn)
            self.head_read(conn)
            self.slots.release()
            if self.refused:
                self.say_refused("too many connections at once", force=True)

    def _served(self, conn: socket.socket) -> None:
        with self.lock:
            self.served[id(conn)] = (time.monotonic(), conn)

    def _gone(self, conn: socket.socket) -> None:
        with self.lock:
            self.served.pop(id(conn), None)

    def _close_oldest(self) -> None:
        """Shut the oldest connection down (each once): its thread ends, its slot frees."""
        with self.lock:
            if not self.served:
                return
            _, conn = self.served.pop(min(self.served, key=lambda key: self.served[key][0]))
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_RDWR)

    def _head_begins(self, conn: socket.socket) -> None:
        with self.lock:
            self.heads[id(conn)] = (time.monotonic() + HEAD_SECONDS, conn)
            if self.reaper is None:
                self.reaper = threading.Thread(target=self._reap, daemon=True)
                self.reaper.start()

    def head_read(self, conn: socket.socket) -> None:
        """The connection's request head is in: no deadline from here on."""
        with self.lock:
            self.heads.pop(id(conn), None)

    def _reap(self) -> None:
        while True:
            time.sleep(0.5)
            now = time.monotonic()
            with self.lock:
                late = [c for when, c in self.heads.values() if when < now]
            for conn in late:   # its reads end (b"" or an error): the thread gives up
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)

    def later(self, job: Callable[[], None]) -> None:
        """``job`` on the one worker thread, or now when its backlog is full."""
        if self.worker is None:
            self.worker = threading.Thread(target=self._work, daemon=True)
            self.worker.start()
        try:
            self.jobs.put_nowait(job)
        except queue.Full:
            job()

    def _work(self) -> None:
        while True:
            job = self.jobs.get()
            with contextlib.suppress(Exception):   # one job's failure is not the worker's end
                job()

    def refuse(self, conn: socket.socket, why: str) -> None:
        with contextlib.suppress(OSError):
            conn.close()
        with self.lock:
            self.refused += 1
        self.say_refused(why)

    def say_refused(self, why: str, force: bool = False) -> None:
        """One line for the refusals since the last (not more than one a second, unless
        ``force``: a slot freed, the burst is over)."""
        now = time.monotonic()
        with self.lock:
            if not self.refused or (not force and now - self.said < SAY_EVERY):
                return
            count, self.refused, self.said = self.refused, 0, now
        self.record({"time": round(time.time(), 3), "host": "", "port": 0, "via": "limit",
                     "allowed": False, "count": count, "error": why, "call": ""})

    # -- open and close --------------------------------------------------------------------

    def opened(self, entry: dict[str, object]) -> list[int]:
        """Put an allowed connection on the record now; its [up, down] tally, which the
        relay adds to as bytes pass."""
        tally = [0, 0]
        with self.lock:
            self.count += 1
            entry["conn"] = f"{self.prefix}.{self.count}"
            self.held[str(entry["conn"])] = (entry, tally, time.monotonic())
        self.record({**entry, "state": "open", "up": 0, "down": 0})
        return tally

    def done(self, entry: dict[str, object]) -> None:
        """The attempt is over: its close line (an allowed one), or its only line."""
        if "conn" not in entry:
            self.record(entry)
            return
        with self.lock:
            held = self.held.pop(str(entry["conn"]), None)
        if held is not None:   # else the proxy's stop closed it already
            self.record(_close(entry))

    def close_all(self, why: str) -> None:
        """The proxy stops: close what it holds, with the bytes so far."""
        with self.lock:
            held, self.held = list(self.held.values()), {}
        for entry, tally, started in held:
            self.record(_close({**entry, "up": tally[0], "down": tally[1], "error": why,
                                "seconds": round(time.monotonic() - started, 3)}))
        if self.refused:
            self.say_refused("too many connections at once", force=True)
        if self.alive is not None:   # nothing open is left to vouch for
            with contextlib.suppress(OSError):
                os.unlink(self.alive)


def _hold_lock(sandbox: str, prefix: str) -> str | None:
    """Lock ``egress.live/PREFIX`` for this process's life (the kernel lets go when it dies);
    its path, or None when it cannot (the reader then shows its open attempts as ended)."""
    import fcntl

    folder = os.path.join(sandbox, LIVE_DIR)
    path = os.path.join(folder, prefix)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return path   # the descriptor stays open, and locked, until the process ends


def _close(entry: dict[str, object]) -> dict[str, object]:
    """The close line: the attempt's id and names (a reader that lost the open line still
    knows it), and what only the end knows."""
    line: dict[str, object] = {k: entry[k] for k in ("conn", "host", "port", "call") if k in entry}
    line.update({k: entry[k] for k in CLOSE_FIELDS if k in entry})
    line.update(state="close", closed=round(time.time(), 3))
    return line


def on_term() -> None:
    """SIGTERM ends the proxy through its ``finally`` (which closes what it holds), not at once."""
    def stop(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
