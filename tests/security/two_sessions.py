"""Two sessions of one account, and a word between their processes: the attacks in which a
call hands a descriptor of its sandbox to another session's process (attack passes 15-20).

Each id setup the overlay engine runs in: the engine run by root, an ordinary user with
subordinate ids, and one without (the single mapping: newuidmap missing from PATH, as in
test_root_call_undoes_nothing)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

from tests.engines import accounts

ID_SETUPS = ["root", "single-mapping", "subordinate-ids"]


def path_without(account: accounts.Account, *tools: str) -> str:
    """PATH with a directory of failing stand-ins for ``tools`` first."""
    shadow = account.base / "shadow-bin"
    shadow.mkdir(exist_ok=True)
    for tool in tools:
        (shadow / tool).write_text("#!/bin/sh\nexit 1\n")
        (shadow / tool).chmod(0o755)
    account.chown(shadow, *(shadow / t for t in tools))
    return f"{shadow}:{os.environ.get('PATH', '/usr/bin:/bin')}"


def account_for(ids: str, tmp_path: Path) -> tuple[accounts.Account, dict[str, str]]:
    """The account of an id setup (``ID_SETUPS``) and the environment its CLI runs with."""
    account = accounts.make("self" if ids == "root" else "ordinary", tmp_path)
    env = {"PATH": path_without(account, "newuidmap", "newgidmap")} \
        if ids == "single-mapping" else {}
    return account, env


def say(name: str, what: bytes = b"go", timeout: float = 20) -> None:
    """Send ``what`` to the process listening on the abstract socket ``name``."""
    deadline = time.monotonic() + timeout
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect("\0" + name)
            s.sendall(what)
            s.close()
            return
        except OSError:
            s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def sandbox_of(account: accounts.Account, project: Path) -> Path:
    for session in account.state.glob("workspace/sessions/*"):
        if json.loads((session / "session.json").read_text()).get("project") == str(project):
            return session / "sandbox"
    raise AssertionError(f"no session of {project}")


def wait_line(proc: subprocess.Popen[str], word: str) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == word, (line, proc.poll())


def text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


# Another session's process: receives one directory descriptor on the abstract socket
# argv[1], then, when told (``say``), unlinks the name argv[2] in that directory.
UNLINK_WHEN_TOLD = """
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\\0" + sys.argv[1])
s.listen(2)
c, _ = s.accept()
_, fds, _, _ = socket.recv_fds(c, 100, 1)
print("received", len(fds), flush=True)
go, _ = s.accept()          # the agent would use a timer; the test says when
go.recv(10)
os.unlink(sys.argv[2], dir_fd=fds[0])
print("unlinked", flush=True)
"""

# The end of a sandboxed call's script: a descriptor of the directory ``SENT`` to the
# process listening on the abstract socket argv[1].
SEND_DIRECTORY = """
import os, socket, sys, time
for _ in range(200):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect("\\0" + sys.argv[1])
        break
    except OSError:
        s.close()
        time.sleep(0.1)
socket.send_fds(s, [b"dir"], [os.open(SENT, os.O_RDONLY | os.O_DIRECTORY)])
print("sent", flush=True)
"""


def other_session(account: accounts.Account, env: dict[str, str], script: str,
                  *args: str) -> subprocess.Popen[str]:
    """``script`` run with ``args`` as a call of another session (project ``other``)."""
    other = account.base / "other"
    other.mkdir()
    account.chown(other)
    full = account.env(**env)
    return subprocess.Popen(
        [*account.prefix, "env", *(f"{k}={v}" for k, v in full.items()), account.python, "-m",
         "manager", "run", "--project", str(other), "--", "python3", "-c", script, *args],
        cwd=other, env=full, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)
