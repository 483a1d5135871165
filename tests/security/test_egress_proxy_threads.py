"""Attack pass 6: the container engines' egress proxy runs on the host and starts a thread
per connection, with no bound: a container held to ``container.pids`` (64 here) opens
hundreds of connections to ``/run/ws-egress/proxy.sock`` from one process (descriptors, not
processes) and the host's proxy holds as many threads (each waits 30 s for a request head;
an allowed relay, forever). The container's limits bound what it may cost the host; the
proxy lets it cost the host's user threads (RLIMIT_NPROC, the user slice's TasksMax) without
limit, and a thread the proxy cannot start ends it (RuntimeError, not OSError)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.claude.conftest import Claude
from tests.engines.conftest import engine_cli
from tests.engines.conftest import engine_name  # noqa: F401 - the fixture
from tests.engines.support import allow_hosts
from tests.engines.test_network import Server
from tests.engines.test_network import server  # noqa: F401 - the fixture

HOLD = 300
FLOOD = """setsid nohup python3 - >/dev/null 2>&1 <<'EOF' &
import socket, time
held = []
for _ in range({count}):
    s = socket.socket(socket.AF_UNIX)
    s.connect("/run/ws-egress/proxy.sock")
    held.append(s)
time.sleep(25)
EOF
echo started
"""


def threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


# docker: rootless podman here takes no pids limit (no delegated controller).
@pytest.mark.parametrize("engine_name", ["docker"], indirect=True)
def test_a_bounded_container_cannot_grow_the_hosts_proxy_without_bound(
        engine_name: str, ws, tmp_path: Path, project: Path, server: Server):  # noqa: F811
    allow_hosts(tmp_path, [f"127.0.0.2:{server.port}"], "container:\n  pids: 64\n")
    claude = Claude(project, tmp_path, engine=engine_cli(engine_name))
    claude.start()
    assert claude.bash("echo ready").stdout.startswith("ready")
    sandbox = tmp_path / "state/workspace/sessions/sess-1/sandbox"
    proxy = int((sandbox / "egress.pid").read_text().split()[0])
    before = threads(proxy)
    assert claude.bash(FLOOD.format(count=HOLD)).stdout.startswith("started")
    most = before
    for _ in range(40):
        most = max(most, threads(proxy))
        time.sleep(0.25)
    from manager.engines.overlay.holder import live

    # A thread per connection served, per connection waiting for the oldest's slot, and the
    # head reaper's.
    assert most <= before + live.LIMIT + live.WAITING + 1, (before, most)


def test_refused_direct_attempts_and_queries_cost_one_thread():
    """The overlay proxy looked up each refused direct attempt's or DNS query's call on a
    thread of its own (up to 200 new ones a second, each scanning /proc): a flood grew the
    proxy without bound. Now one worker does the lookups, :data:`live.BACKLOG` deep, and
    past that the reader does them itself: however many come, one thread more."""
    import threading

    from manager.engines.overlay.holder import live

    proxy = live.Live(lambda entry: None)
    busy, release, done = threading.Event(), threading.Event(), []
    before = threading.active_count()
    proxy.later(lambda: (busy.set(), release.wait()))   # the worker is held by a slow lookup
    assert busy.wait(10)
    for i in range(live.BACKLOG + 100):
        proxy.later(lambda i=i: done.append(i))
    assert threading.active_count() == before + 1
    assert done == list(range(live.BACKLOG, live.BACKLOG + 100))   # ran at once, on the reader
    release.set()
    deadline = time.monotonic() + 10
    while len(done) < live.BACKLOG + 100 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(done) == list(range(live.BACKLOG + 100))
    assert threading.active_count() == before + 1
