"""Attack pass 15 (critical: an unreviewed commit): a process of *another* session writes this
session's sandbox after review, and commit applies what no review showed.

The overlay engine trusts one thing between a review and a commit: that nothing of the
session runs (its calls' processes end with them; commit waits for what still runs in the
session's pid namespace), so it keeps no record of what review showed (session/shown.py and
session/reviewed.py only act where ``running/`` exists: the container engines). But a write
into the sandbox needs no process of the session: it needs a descriptor of the session's
overlay. A call can hand one out. With ``network: open`` (the default) every session's
calls share the host's network namespace, and with it the abstract unix socket namespace:
a call of session A sends a directory descriptor of its own root (its project directory, an
overlay directory) with SCM_RIGHTS to a process of session B (the same agent in another
Claude Code window, another project; B's call may run as long as it likes, it is B's own
running call). A's call ends; ``workspace status`` of A says nothing runs and nothing
changed; then B's process creates a file through the descriptor: it lands in A's upper
directory. ``workspace commit`` of A applies it to the real project: the user committed a
file no review of A ever showed (and B's status does not show it either: it is not in B's
sandbox). The same holds with ``network`` off or a list wherever both sessions reach a
broker that passes descriptors (the user's D-Bus session bus, bound into every sandbox).

Reproduction (any account): in project Q, ``workspace run -- python3 recv.py`` (binds
``\\0name``, receives a descriptor, later ``openat(fd, "injected.txt", O_CREAT)``); in project
P, ``workspace run -- python3 -c 'socket.send_fds(connect("\\0name"), [b"x"], [open(".")])'``;
``workspace status`` in P: no change; B writes; ``workspace commit`` in P: "committed 1 path",
``P/injected.txt`` is real.

Rule broken: nothing reaches the real system until reviewed, and review shows exactly what
commit applies. Rule that would close the class: commit applies only what the last review
recorded (the entries' attributes and digests, as session/shown.py does for the container
engines), refusing anything changed or added since, on the overlay engine too -- the
absence of the session's processes does not mean the absence of writers: an open
descriptor of the overlay outlives every process the session counts.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.engines import accounts
from tests.security.two_sessions import ID_SETUPS
from tests.security.two_sessions import account_for
from tests.security.two_sessions import say

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]

RECEIVE = """
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\\0" + sys.argv[1])
s.listen(2)
c, _ = s.accept()
_, fds, _, _ = socket.recv_fds(c, 100, 1)
print("received", len(fds), flush=True)
go, _ = s.accept()          # the agent would use a timer; the test says when
go.recv(10)
fd = os.open("injected.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=fds[0])
os.write(fd, b"written by another session after review\\n")
os.close(fd)
print("wrote", flush=True)
"""

SEND = """
import os, socket, sys, time
for _ in range(200):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect("\\0" + sys.argv[1])
        break
    except OSError:
        s.close()
        time.sleep(0.1)
socket.send_fds(s, [b"dir"], [os.open(".", os.O_RDONLY | os.O_DIRECTORY)])
print("sent", flush=True)
"""


@pytest.mark.parametrize("ids", ID_SETUPS)
def test_another_sessions_process_cannot_write_what_commit_applies(ids: str, tmp_path: Path) -> None:
    account, env = account_for(ids, tmp_path)
    other = account.base / "other"
    other.mkdir()
    account.chown(other)
    name = f"ws-attack15-{uuid.uuid4().hex[:12]}"
    full = account.env(**env)
    receiver = subprocess.Popen(
        [*account.prefix, "env", *(f"{k}={v}" for k, v in full.items()), account.python, "-m",
         "manager", "run", "--project", str(other), "--", "python3", "-c", RECEIVE, name],
        cwd=other, env=full, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        sent = account.ws("run", "--", "python3", "-c", SEND, name, env=env, timeout=60)
        assert "sent" in sent.stdout, sent
        review = json.loads(account.ws("status", "--json", env=env, check=True).stdout)
        assert not review.get("running"), review
        assert not [c for c in review["changes"] if "injected" in json.dumps(c)], review
        say(name)
        out, err = receiver.communicate(timeout=60)
        assert "wrote" in out, (out, err)
        account.ws("commit", env=env, timeout=60)
        injected = account.project / "injected.txt"
        assert not injected.exists(), (
            "commit applied a file that the review of this session never showed: another "
            f"session's process wrote it through a descriptor of this sandbox: {injected.read_text()!r}")
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait(timeout=10)
        accounts.clean(account)


HOLD = """
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\\0" + sys.argv[1])
s.listen(2)
c, _ = s.accept()
_, fds, _, _ = socket.recv_fds(c, 100, 1)
print("received", len(fds), flush=True)
go, _ = s.accept()
print("asked", go.recv(10).decode(), flush=True)
if go.recv(10) == b"":
    pass
"""

MAKE_AND_SEND = """
import os, socket, sys, time
os.makedirs("fresh", exist_ok=True)
with open("fresh/a.txt", "w") as f:
    f.write("reviewed\\n")
for _ in range(200):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect("\\0" + sys.argv[1])
        break
    except OSError:
        s.close()
        time.sleep(0.1)
socket.send_fds(s, [b"dir"], [os.open("fresh", os.O_RDONLY | os.O_DIRECTORY)])
print("sent", flush=True)
"""


@pytest.mark.parametrize("ids", ID_SETUPS)
def test_commit_waits_for_no_process_outside_to_hold_the_sandbox(ids: str, tmp_path: Path) -> None:
    """Between commit's check and its last rename, and after it: a descriptor of the overlay
    held outside the session writes the upper, and a new directory commit renamed into the
    real tree through it. Commit applies nothing while an overlay of the session lives on
    (manager/fs/overlay_inuse.py), and applies what review showed once none does."""
    account, env = account_for(ids, tmp_path)
    other = account.base / "other"
    other.mkdir()
    account.chown(other)
    name = f"ws-held-{uuid.uuid4().hex[:12]}"
    full = account.env(**env)
    holder = subprocess.Popen(
        [*account.prefix, "env", *(f"{k}={v}" for k, v in full.items()), account.python, "-m",
         "manager", "run", "--project", str(other), "--", "python3", "-c", HOLD, name],
        cwd=other, env=full, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        sent = account.ws("run", "--", "python3", "-c", MAKE_AND_SEND, name, env=env, timeout=60)
        assert "sent" in sent.stdout, sent
        account.ws("status", env=env, check=True)
        refused = account.ws("commit", env=env, timeout=60)
        assert refused.returncode != 0 and "holds its sandbox open" in refused.stderr, refused
        assert not (account.project / "fresh").exists()
        say(name)   # the holder ends; nothing holds the sandbox now
        out, err = holder.communicate(timeout=60)
        assert "asked" in out, (out, err)
        done = account.ws("commit", env=env, timeout=60)
        assert done.returncode == 0, done
        assert (account.project / "fresh/a.txt").read_text() == "reviewed\n"
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=10)
        accounts.clean(account)
