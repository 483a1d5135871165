"""Attack pass 22 (critical: an unreviewed commit): an entry added below a new directory
after review is committed, because commit's check against the review record is handed the
changes with each new tree collapsed to one entry.

The attack (overlay engine; try alike): a call makes ``fresh/a.txt`` and hands a descriptor
of ``fresh`` to a process of another session (an abstract unix socket: attack pass 15).
``workspace status`` shows ``fresh/a.txt`` and records ``fresh`` and ``fresh/a.txt`` by name
(``session/shown.py``: overlay keeps no call records, so the record is checked by name). The
other session's process then creates ``fresh/evil.txt`` through the descriptor and exits, so
the in-use probe finds nothing held. ``workspace commit``: ``apply.commit`` reads the changes
with ``collapse=collector`` (``fresh`` becomes one change, ``below=None``, nothing below it
read) and hands that list to ``vet``; ``shown.added`` walks below a new directory only when
its ``below`` is set, so it sees ``fresh`` (recorded) and nothing else; ``fresh``'s recorded
attributes (mode, xattrs) do not move when a child is added. The tree step's census counts
``evil.txt`` in and copies it: committed, never shown. (Attack pass 15's test writes a file
beside the project root, not below a new directory, and so is still refused.) This came in
with pass 21's change that vets commit's own read instead of review's walk (which set
``below`` and listed every entry).

The container engines' volume mode checks the record by name too, and there the writer is
simply a process the call left running (docker-volume, podman-volume fail the same way; host
mode's ctime check refuses it).

Promise broken: what commit applies is exactly what review showed.

Rule that would close the class: the check against what review showed is asked of every
entry commit applies, each entry a tree step carries included (the census's entries, or the
changes ``trees.expanded`` makes of them), never of a summary of them.
"""

from __future__ import annotations

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
fd = os.open("evil.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=fds[0])
os.write(fd, b"written by another session after review\\n")
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
def test_an_entry_added_below_a_new_directory_after_review_is_not_committed(
        ids: str, tmp_path: Path) -> None:
    account, env = account_for(ids, tmp_path)
    other = account.base / "other"
    other.mkdir()
    account.chown(other)
    name = f"ws-attack22-{uuid.uuid4().hex[:12]}"
    full = account.env(**env)
    receiver = subprocess.Popen(
        [*account.prefix, "env", *(f"{k}={v}" for k, v in full.items()), account.python, "-m",
         "manager", "run", "--project", str(other), "--", "python3", "-c", RECEIVE, name],
        cwd=other, env=full, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        sent = account.ws("run", "--", "python3", "-c", MAKE_AND_SEND, name, env=env, timeout=60)
        assert "sent" in sent.stdout, sent
        review = account.ws("status", "--json", env=env, check=True).stdout
        assert "a.txt" in review and "evil" not in review, review
        account.ws("diff", env=env, check=True)
        say(name)
        out, err = receiver.communicate(timeout=60)
        assert "wrote" in out, (out, err)
        done = account.ws("commit", env=env, timeout=60)
        evil = account.project / "fresh/evil.txt"
        assert not evil.exists(), (
            "commit applied fresh/evil.txt, which no review of this session showed (added "
            f"below a new directory after review): {evil.read_text()!r}; commit said "
            f"{done.stdout!r} {done.stderr!r}")
        assert "evil.txt" in done.stderr and done.returncode != 0, done
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait(timeout=10)
        accounts.clean(account)


# The container engines' volume mode checks the record by name too (no time tells there),
# and a call's background process is the writer: no second session needed.
from tests.engines.conftest import engine_cli  # noqa: E402
from tests.security.after_review import container_engine  # noqa: E402,F401 - the fixture
from tests.security.after_review import release  # noqa: E402

LATER = ("sh -c 't=0; while [ ! -e /dev/shm/go ] && [ $t -lt 300 ]; do sleep 0.1; t=$((t+1)); done; "
         "echo evil > fresh/evil.txt; : > /dev/shm/done; sleep 60' >/dev/null 2>&1 </dev/null &")


@pytest.mark.as_user
def test_container_an_entry_added_below_a_new_directory_after_review_is_not_committed(
        ws, project: Path, container_engine: str) -> None:  # noqa: F811
    cli = engine_cli(container_engine)
    ws("run", "--", "sh", "-c", "mkdir fresh && echo ok > fresh/a.txt; " + LATER, check=True)
    shown = ws("diff", "--no-pager", check=True).stdout + \
        ws("status", "--no-pager", check=True).stdout
    assert "a.txt" in shown and "evil" not in shown, shown
    release(cli, "/dev/shm/done", what="the background process never ran")
    proc = ws("commit")
    evil = project / "fresh/evil.txt"
    assert not evil.exists(), (
        f"commit applied fresh/evil.txt, written after the review by a process the call left "
        f"running: commit said {proc.stdout!r} {proc.stderr!r}")
