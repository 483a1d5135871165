"""Attack pass 18 (critical: a host write after commit, never reviewed): the kernel's in-use
mark that commit's probe reads belongs to the *first* overlay over an upper; a second one
mounted over the same upper while the first lives (``index=off``: the kernel only warns)
never takes it, and when the first goes the mark goes with it: the probe says "free" while
the second lives on, held by a descriptor outside the session.

manager/fs/overlay_inuse.py asks the kernel whether an upper is in use (an overlay with
``index=on`` over it fails with EBUSY). overlayfs sets that mark in ``ovl_get_upper`` with a
*trylock*: when the upper is marked already and ``index=off`` (the holder's overlays), the
mount goes on with a warning ("upperdir is in-use ... undefined behavior") and the new
overlay does not own the mark; the old overlay's release clears it. A session gets a new
holder whenever the old one went (idle exit, retired after an outside change, commit's
release, a network change), and a new holder mounts new overlays over the same uppers, even
while an overlay of the old holder is still alive through a descriptor held elsewhere.

The attack, all in the agent's hands: session B's call P (any long call) receives a
descriptor D1 of session A's project overlay from A's first call (abstract unix socket on
the shared network namespace: pass 15). A's holder goes (the test kills it, as an idle exit
or a retirement does); A's next call runs in a fresh holder, whose project overlay is
mounted over the same upper without the mark; it makes ``fresh/`` and sends D2, a
descriptor of it, to P. P closes D1: the first overlay is released, and the mark with it.
Review of A shows ``fresh/a.txt``; ``workspace commit``: the probe finds the project's upper
unmarked, commit renames ``fresh`` into the real project, and P creates
``fresh/planted.sh`` through D2: a real file no review showed.

The fresh holder is the agent's to ask for: its Write tool writes ``.workspace.yaml`` in the
real project (an untrusted project file may add to ``hide``) with a glob below the project,
``hide: ["*.secret"]``; after that any file the Write tool saves in the project makes the
next call's sync retire the holder ("... is hidden and appeared after the sandbox
started": holder/project.py counts a glob as new) and the call run in a fresh one. Without
the glob the same outside write is refreshed in place (checked: the holder stays).

Reproduction (any account): in Q ``workspace run -- python3 hold.py`` (receives D1, then D2,
closes D1 when told, later writes through D2); in P, with ``.workspace.yaml`` holding
``hide: ["*.secret"]``: ``workspace run -- python3 send_cwd.py`` (D1); write ``P/notes.txt``
outside (the Write tool) -- or ``kill`` P's holder, or wait for its idle exit;
``workspace run -- python3 make_and_send.py`` (``fresh/``, D2); hold.py closes D1;
``workspace status``/``diff``/``commit`` in P: "committed 2 paths"; hold.py writes:
``P/fresh/planted.sh`` is real. Parametrised: the holder killed (an idle exit, commit's
release), and retired by the agent's outside write; root, single mapping, subordinate ids.

Rule broken: commit applies nothing while an overlay of the session's uppers lives on
(docs/security.md, passes 15/16; manager/fs/overlay_inuse.py's premise that every live
overlay over an upper holds the kernel's mark). Rule that would close the class: never mount
an overlay over an upper the kernel reports in use (mount the holder's overlays with
``index=on``, or probe each upper before mounting it, and refuse to start a holder while
one is held); then every live overlay over an upper holds its mark.

Closed since: commit never publishes an inode of the upper (manager/commit/steps.py, trees.py:
every file a copy renamed into place, a new directory a copy renamed in whole), so a
descriptor of an overlay that outlived the probe reaches only the upper; and the holder
records every point it mounted an overlay at, which the probe takes (holder/names.OVERLAID).
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
import os, socket, sys
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
fd = os.open("planted.sh", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o755, dir_fd=second[0])
os.write(fd, b"#!/bin/sh\\necho planted after commit\\n")
os.close(fd)
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


@pytest.mark.parametrize("how", ["killed", "outside-write"])
@pytest.mark.parametrize("ids", ID_SETUPS)
def test_commit_sees_an_overlay_mounted_over_an_upper_already_in_use(ids: str, how: str,
                                                                     tmp_path: Path) -> None:
    account, env = account_for(ids, tmp_path)
    if how == "outside-write":
        # The agent's Write tool (real project files, by design): an untrusted project file
        # may add to ``hide``; a glob below the project makes every outside change there
        # need a fresh holder (holder/project.py new_hidden).
        config = account.project / ".workspace.yaml"
        config.write_text('hide: ["*.secret"]\n')
        account.chown(config)
    other = account.base / "other"
    other.mkdir()
    account.chown(other)
    name = f"ws-attack18m-{uuid.uuid4().hex[:12]}"
    full = account.env(**env)
    holder = subprocess.Popen(
        [*account.prefix, "env", *(f"{k}={v}" for k, v in full.items()), account.python, "-m",
         "manager", "run", "--project", str(other), "--", "python3", "-c", HOLD, name],
        cwd=other, env=full, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        sent = account.ws("run", "--", "python3", "-c", SEND_PROJECT, name, env=env, timeout=60)
        assert "sent" in sent.stdout, sent
        wait_line(holder, "first")
        # A's holder goes (killed: as an idle exit or commit's release; outside-write: it
        # retires at the next call, the agent's doing): the first overlay lives on through
        # the descriptor held in session B.
        sandbox = sandbox_of(account, account.project)
        pid = overlay_engine.holder_pid(sandbox)
        assert pid is not None
        if how == "killed":
            overlay_engine._kill(pid)
            time.sleep(0.5)
        else:
            note = account.project / "notes.txt"   # the agent's Write tool, outside
            note.write_text("written by Claude's Write tool\n")
            account.chown(note)
            time.sleep(0.5)
        made = account.ws("run", "--", "python3", "-c", MAKE_AND_SEND, name, env=env, timeout=60)
        assert "sent" in made.stdout, made
        assert overlay_engine.holder_pid(sandbox) not in (None, pid), "no fresh holder"
        wait_line(holder, "second")
        say(name, b"drop")
        wait_line(holder, "dropped")
        review = json.loads(account.ws("status", "--json", env=env, check=True).stdout)
        assert not review.get("running"), review
        account.ws("diff", env=env, check=True)
        done = account.ws("commit", env=env, timeout=60)
        refused = done.returncode != 0
        assert not refused or "holds its sandbox open" in done.stderr, done
        say(name, b"go")
        out, err = holder.communicate(timeout=60)
        # Through its descriptor it writes the sandbox's upper (or, the directory gone with
        # the commit, nothing at all): never the real project (commit copies, never moves).
        assert "wrote" in out or "FileNotFoundError" in err, (out, err)
        planted = account.project / "fresh" / "planted.sh"
        assert not planted.exists(), (
            "commit's in-use probe said free while a second overlay over the project's upper "
            "(mounted by a fresh holder while the first still held the kernel's mark) was held "
            f"by another session; it wrote the real project after commit: {planted.read_text()!r}"
            f"\ncommit said: {done.stdout}{done.stderr}")
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=10)
        accounts.clean(account)
