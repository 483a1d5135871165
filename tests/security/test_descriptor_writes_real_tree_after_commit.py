"""Attack pass 16 (critical: a host write after commit, never reviewed): an overlay
descriptor held by another session's process writes the *real* tree once commit has moved
the sandbox's entries into it.

Commit moves an upper entry into the real tree by renaming it (a file with one link, a new
directory as one step): the real file *is* the inode the sandbox wrote, the real new
directory *is* the upper directory. An open descriptor of the overlay file (or directory)
reaches that inode: overlayfs forwards a write on its file to the upper file it opened, and
a create in an overlay directory to its upper directory, wherever that now is. Pass 15's
record (session/shown.py) compares entries at commit; it says nothing about what happens to
them once they are real. A call of session A makes ``newdir/`` and ``note.txt`` and edits
``tracked.txt`` (copy-up), then hands an O_RDWR descriptor of each file and an O_DIRECTORY
descriptor of ``newdir`` (SCM_RIGHTS over an abstract unix socket: every session with
``network: open`` shares the host's) to a call of session B, which runs as long as it likes.
A's call ends; ``workspace status``/``diff`` of A show the benign content; ``workspace
commit`` applies it. Then B writes through the descriptors: the real ``note.txt`` and the
real ``tracked.txt`` get new bytes, and a new file appears in the real ``newdir/``, on the
host, no review, no commit, and no sandbox ever holding them (the writes are not in B's upper
either: no review of any session can show them). The planted file is made setuid too: on the
root account a setuid-root file owned by uid 0 lands in the real project, past the
``--allow-special`` rule; on the ordinary account a setuid file of the user's.

Reproduction (any account, overlay engine): in project Q, ``workspace run -- python3
recv.py`` (receives the descriptors, waits, writes through them); in project P, ``workspace
run -- python3 send.py`` (makes the entries, sends their descriptors); ``workspace diff``
and ``workspace commit`` in P; then recv.py writes: ``P/note.txt``, ``P/tracked.txt`` and
``P/newdir/planted.sh`` are changed/created on the real disk.

Rule broken: nothing a sandboxed command does reaches the real system until the user reviews
and commits; nothing in a sandbox can reach a real file after it was committed (docs/
security.md, commit side). Rule that would close the class: no inode that an overlay of a
sandbox ever exposed becomes a real file or directory while any descriptor of that overlay
may be open anywhere (commit copies the data into a fresh inode, as it does for a file with
other links, and makes new directories fresh, moving only children that are copied), or:
no descriptor of a sandbox's overlay can leave the session (a network, hence abstract-socket,
namespace of its own per session; no broker reachable by two sandboxes).

Closed since: commit applies nothing while an overlay of the session's uppers lives on
anywhere (manager/fs/overlay_inuse.py: the kernel's in-use mark on an upper directory, probed
by a second overlay that asks for index=on), so no descriptor outlives the sandbox into the
real tree; the user ends the holder and commits, or discards.
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
from tests.security.two_sessions import text

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]

RECEIVE = """
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\\0" + sys.argv[1])
s.listen(2)
c, _ = s.accept()
_, fds, _, _ = socket.recv_fds(c, 100, 4)
print("received", len(fds), flush=True)
go, _ = s.accept()          # the agent would poll; the test says when
go.recv(10)
note, tracked, newdir = fds
os.pwrite(note, b"REPLACED AFTER COMMIT\\n", 0)
os.ftruncate(note, len(b"REPLACED AFTER COMMIT\\n"))
os.pwrite(tracked, b"REPLACED AFTER COMMIT\\n", 0)
os.ftruncate(tracked, len(b"REPLACED AFTER COMMIT\\n"))
fd = os.open("planted.sh", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o755, dir_fd=newdir)
os.write(fd, b"#!/bin/sh\\necho planted after commit\\n")
try:
    os.fchmod(fd, 0o4755)   # setuid, as the call's uid (root's on the root account)
except OSError:
    pass
os.close(fd)
print("wrote", flush=True)
"""

SEND = """
import os, socket, sys, time
os.mkdir("newdir")
with open("newdir/readme.txt", "w") as f:
    f.write("benign\\n")
with open("note.txt", "w") as f:
    f.write("benign note\\n")
with open("tracked.txt", "a") as f:
    f.write("benign edit\\n")
fds = [os.open("note.txt", os.O_RDWR), os.open("tracked.txt", os.O_RDWR),
       os.open("newdir", os.O_RDONLY | os.O_DIRECTORY)]
for _ in range(200):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect("\\0" + sys.argv[1])
        break
    except OSError:
        s.close()
        time.sleep(0.1)
socket.send_fds(s, [b"fds"], fds)
print("sent", flush=True)
"""


@pytest.mark.parametrize("ids", ID_SETUPS)
def test_a_descriptor_held_elsewhere_cannot_write_committed_files(ids: str, tmp_path: Path) -> None:
    account, env = account_for(ids, tmp_path)
    tracked = account.project / "tracked.txt"
    tracked.write_text("original\n")
    account.chown(tracked)
    other = account.base / "other"
    other.mkdir()
    account.chown(other)
    name = f"ws-attack16-{uuid.uuid4().hex[:12]}"
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
        account.ws("diff", env=env, check=True)
        done = account.ws("commit", env=env, timeout=60)
        # Either commit applies nothing while the descriptors are held elsewhere (it says so),
        # or what it applies is out of their reach.
        refused = done.returncode != 0
        assert not refused or "holds its sandbox open" in done.stderr, done
        note = "" if refused else "benign note\n"
        edited = "original\n" if refused else "original\nbenign edit\n"
        assert text(account.project / "note.txt") == note, done
        assert tracked.read_text() == edited, done
        say(name)
        out, err = receiver.communicate(timeout=60)
        assert "wrote" in out, (out, err)
        late = {
            "note.txt": text(account.project / "note.txt"),
            "tracked.txt": tracked.read_text(),
            "newdir/planted.sh": (account.project / "newdir" / "planted.sh").exists(),
        }
        planted = account.project / "newdir" / "planted.sh"
        if planted.exists():
            st = planted.stat()
            late["newdir/planted.sh mode, owner"] = f"{st.st_mode:o} {st.st_uid}"
        assert late == {"note.txt": note, "tracked.txt": edited, "newdir/planted.sh": False}, (
            "a process of another session wrote the real tree after commit, through "
            f"descriptors of this session's overlay: {late}")
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait(timeout=10)
        accounts.clean(account)
