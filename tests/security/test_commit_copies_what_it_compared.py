"""Attack pass 19 (critical: content no review showed is committed): a write during commit,
between commit's comparison with the review record and its copy of the upper.

Pass 18's close made commit copy every upper entry instead of renaming it, so a descriptor
of an overlay the in-use probe cannot see (pass 18: a second overlay over the same upper, a
fresh holder's, never owns the kernel's mark) reaches only the upper. The docs keep the probe
"against writes to the upper while commit copies it", and that is exactly what it cannot
see: the holder still mounts its overlays over an upper in use (``index=off``: the kernel
only warns), so a descriptor of the fresh holder's overlay, held by another session's
process after the first overlay went, is invisible to ``manager/fs/overlay_inuse.py``.

Commit reads each file twice: ``shown.late`` digests it (equal to the review's record:
pass), then, after the rest of the comparison, a second walk (``read_changes``), planning
and journaling, ``trees._copy_tree`` / ``steps._copy_file`` read it again and publish what
they read. The held descriptor writes in between. It knows when: relatime. After the
review read the file, the holder bumps its ctime through the descriptor (``fchmod`` to the
same mode: no attribute the record compares moves; overlay keeps no ``running/``, so
``reviewed.since`` checks no times), so commit's first read moves the atime, which the
holder polls with ``fstat`` on the descriptor (the upper inode's); at once it rewrites the
bytes (same length). The copy takes the new bytes: the real file holds ``EVIL`` that
neither ``status`` nor ``diff`` ever showed, and commit says "committed".

Reproduction (any account), pass 18's steps up to "dropped" (session B's ``hold.py`` keeps
D2, a descriptor of ``fresh/`` in A's fresh holder's unmarked overlay); ``workspace status``
and ``workspace diff`` in A show ``fresh/a.txt`` = ``reviewed``; hold.py opens
``fresh/a.txt`` through D2, ``fchmod``s it to its mode, and polls its atime;
``workspace commit`` in A: "committed"; the real ``fresh/a.txt`` reads ``EVIL!!!!``.

Rule broken: what commit applies is what review showed (docs/security.md, commit side,
"What commit applies is what review showed" and "A descriptor of the overlay held outside
the session": the probe "stays ... against writes to the upper while commit copies it").
Rules that would close the class: (a) every live overlay over an upper holds its mark
(mount the holder's overlays with ``index=on``, or probe each upper before mounting it and
refuse to mount one in use), so the probe sees every holder; and (b) independently of any
probe, commit publishes exactly the bytes it compared: digest the *copy* (or the source
descriptor it copies from, read once) and compare that with the review record before the
rename, not the upper file in an earlier pass.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from manager.engines.overlay import engine as overlay_engine
from tests.engines import accounts
from tests.security.two_sessions import ID_SETUPS
from tests.security.two_sessions import account_for
from tests.security.two_sessions import sandbox_of
from tests.security.two_sessions import say
from tests.security.two_sessions import wait_line

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]

HOLD = """
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\\0" + sys.argv[1])
s.listen(4)
c, _ = s.accept()
_, first, _, _ = socket.recv_fds(c, 100, 1)
print("first", flush=True)
c, _ = s.accept()
_, second, _, _ = socket.recv_fds(c, 100, 1)
print("second", flush=True)
c, _ = s.accept()
c.recv(10)
os.close(first[0])          # the first overlay goes, and the in-use mark with it
print("dropped", flush=True)
c, _ = s.accept()
c.recv(10)
fd = os.open("a.txt", os.O_RDWR, dir_fd=second[0])
st = os.fstat(fd)
os.fchmod(fd, st.st_mode & 0o7777)   # ctime moves past the review's atime: the next read shows
before = os.fstat(fd).st_atime_ns
print("armed", flush=True)
deadline = time.monotonic() + 30
while os.fstat(fd).st_atime_ns == before:
    if time.monotonic() > deadline:
        print("no read", flush=True)
        sys.exit(0)
    time.sleep(0.0005)
os.pwrite(fd, b"EVIL!!!!\\n", 0)
print("wrote", flush=True)
"""

SEND_PROJECT = """
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

MAKE_AND_SEND = """
import os, socket, sys, time
os.makedirs("fresh", exist_ok=True)
with open("fresh/a.txt", "w") as f:
    f.write("reviewed\\n")
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("\\0" + sys.argv[1])
socket.send_fds(s, [b"dir"], [os.open("fresh", os.O_RDONLY | os.O_DIRECTORY)])
print("sent", flush=True)
"""


@pytest.mark.parametrize("ids", ID_SETUPS)
def test_commit_copies_what_it_compared(ids: str, tmp_path: Path) -> None:
    account, env = account_for(ids, tmp_path)
    other = account.base / "other"
    other.mkdir()
    account.chown(other)
    name = f"ws-attack19c-{uuid.uuid4().hex[:12]}"
    full = account.env(**env)
    holder = subprocess.Popen(
        [*account.prefix, "env", *(f"{k}={v}" for k, v in full.items()), account.python, "-m",
         "manager", "run", "--project", str(other), "--", "python3", "-c", HOLD, name],
        cwd=other, env=full, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        sent = account.ws("run", "--", "python3", "-c", SEND_PROJECT, name, env=env, timeout=60)
        assert "sent" in sent.stdout, sent
        wait_line(holder, "first")
        sandbox = sandbox_of(account, account.project)
        pid = overlay_engine.holder_pid(sandbox)
        assert pid is not None
        overlay_engine._kill(pid)      # an idle exit (or any retirement: pass 18)
        time.sleep(0.5)
        made = account.ws("run", "--", "python3", "-c", MAKE_AND_SEND, name, env=env, timeout=60)
        assert "sent" in made.stdout, made
        assert overlay_engine.holder_pid(sandbox) not in (None, pid), "no fresh holder"
        wait_line(holder, "second")
        say(name, b"drop")
        wait_line(holder, "dropped")
        review = json.loads(account.ws("status", "--json", env=env, check=True).stdout)
        assert not review.get("running"), review
        diff = account.ws("diff", env=env, check=True)
        assert "reviewed" in diff.stdout and "EVIL" not in diff.stdout, diff
        say(name, b"arm")
        wait_line(holder, "armed")
        done = account.ws("commit", env=env, timeout=60)
        out, err = holder.communicate(timeout=60)
        real = account.project / "fresh" / "a.txt"
        if done.returncode != 0:
            assert "holds its sandbox open" in done.stderr or "changed after review" in \
                done.stderr, done
            assert not real.exists() or real.read_text() == "reviewed\n"
            return
        assert real.read_text() == "reviewed\n", (
            "commit applied bytes no review showed: a descriptor of the fresh holder's overlay "
            "(unmarked, invisible to the in-use probe) rewrote the upper file after commit "
            f"compared it with the review record and before it copied it: {real.read_text()!r}"
            f"\nholder: {out}{err}\ncommit said: {done.stdout}{done.stderr}")
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=10)
        accounts.clean(account)
