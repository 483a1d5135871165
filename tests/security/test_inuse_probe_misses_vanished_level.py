"""Attack pass 18 (critical: a host write after commit, never reviewed): commit's in-use
probe looks for live overlays only where the host's mounts are *at commit*; the holder mounted
them where the host's mounts were *when it built the sandbox*. A host mount that goes away in
between hides every per-entry overlay of the directory above it from the probe.

The overlay holder snapshots each directory with a host mount below it (a "level") and
mounts one overlay per entry of it, its upper ``UPPER/<level>/<entry>``
(holder/build.py ``Builder.level``/``entry``; the list of mounts is read once, at build).
``session/sandbox.py _overlay_uppers`` computes the uppers to probe from
``mountinfo.read()`` of the *commit* process: the upper, and the entries of the directories
at or above a mount point *now*. When the only mount below a level has gone since the build
(a container stopped -- ``docker run``/``docker rm`` are in the agent's hands through the
passthrough --, a FUSE/sshfs/USB mount unmounted, an automount expired, a user's login tmpfs
gone), the level's entries are no longer listed, and the overlays of those entries -- among
them the project's own, when the project lies in such a directory -- are never probed.

Then pass 16 works again: a call of session A makes ``fresh/`` in the project and hands an
O_DIRECTORY descriptor of it to a process of session B (abstract unix socket, shared by
every ``network: open`` session). Review of A shows ``fresh/a.txt``. The host mount beside
the project goes away. ``workspace commit`` of A: the probe says "free" (it never asked
about ``UPPER/<base>/proj``), commit renames ``fresh`` into the real project, and B creates
``fresh/planted.sh`` through its descriptor: a file in the real project, written after
commit, that no review showed and no sandbox holds.

The test stands in for "a host mount went away" with a tmpfs the test mounts beside the
project before the session starts and unmounts after review (as root, on the host).

Reproduction (any account): ``mkdir B/mnt; mount -t tmpfs t B/mnt`` (B the project's
parent), start sessions in ``B/proj`` and ``B/other``; B's call receives and holds a
descriptor, A's call makes ``fresh/`` and sends its descriptor; ``workspace status`` in A;
``umount B/mnt``; ``workspace commit`` in A: committed; B writes ``fresh/planted.sh``:
``B/proj/fresh/planted.sh`` is real.

Rule broken: nothing reaches the real system until reviewed and committed; commit applies
nothing while an overlay of the session's uppers lives on (docs/security.md, pass 15/16).
Rule that would close the class: probe every upper an overlay of the session was ever
given, as the holder recorded it when it mounted it (a list in the sandbox's state, written
by the holder for each make_upper/overlay it mounts, read by commit), never a list
re-derived from the host's state at commit time; or probe every directory of the upper tree
that is not scaffolding-free (all of them, bounded), failing closed on a mismatch.

Closed since: commit never publishes an inode of the upper (manager/commit/steps.py, trees.py:
every file a copy renamed into place, a new directory a copy renamed in whole), so a
descriptor of an overlay that outlived the probe reaches only the upper; and the holder
records every point it mounted an overlay at, which the probe takes (holder/names.OVERLAID).
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

HOLD = """
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\\0" + sys.argv[1])
s.listen(2)
c, _ = s.accept()
_, fds, _, _ = socket.recv_fds(c, 100, 1)
print("received", len(fds), flush=True)
go, _ = s.accept()
go.recv(10)
fd = os.open("planted.sh", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o755, dir_fd=fds[0])
os.write(fd, b"#!/bin/sh\\necho planted after commit\\n")
os.close(fd)
print("wrote", flush=True)
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
def test_commit_probes_the_overlays_of_a_level_whose_mount_went_away(ids: str, tmp_path: Path) -> None:
    account, env = account_for(ids, tmp_path)
    mnt = account.base / "mnt"   # a host mount beside the project: its parent is a level
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "ws-attack18", str(mnt)], check=True)
    mounted = True
    other = account.base / "other"
    other.mkdir()
    account.chown(other)
    name = f"ws-attack18-{uuid.uuid4().hex[:12]}"
    full = account.env(**env)
    holder = subprocess.Popen(
        [*account.prefix, "env", *(f"{k}={v}" for k, v in full.items()), account.python, "-m",
         "manager", "run", "--project", str(other), "--", "python3", "-c", HOLD, name],
        cwd=other, env=full, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        sent = account.ws("run", "--", "python3", "-c", MAKE_AND_SEND, name, env=env, timeout=60)
        assert "sent" in sent.stdout, sent
        review = json.loads(account.ws("status", "--json", env=env, check=True).stdout)
        assert not review.get("running"), review
        account.ws("diff", env=env, check=True)
        subprocess.run(["umount", str(mnt)], check=True)   # the host mount goes away
        mounted = False
        done = account.ws("commit", env=env, timeout=60)
        refused = done.returncode != 0
        assert not refused or "holds its sandbox open" in done.stderr, done
        say(name)
        out, err = holder.communicate(timeout=60)
        # Through its descriptor it writes the sandbox's upper (or, the directory gone with
        # the commit, nothing at all): never the real project (commit copies, never moves).
        assert "wrote" in out or "FileNotFoundError" in err, (out, err)
        planted = account.project / "fresh" / "planted.sh"
        assert not planted.exists(), (
            "commit's in-use probe missed the project's overlay (its level's host mount went "
            "away after the sandbox was built): commit applied while another session held a "
            f"descriptor, which then wrote the real project: {planted} = {planted.read_text()!r}"
            f"\ncommit said: {done.stdout}{done.stderr}")
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=10)
        if mounted:
            subprocess.run(["umount", "-l", str(mnt)], check=False)
        accounts.clean(account)
