"""Attack pass 24: ``workspace commit PATH`` (or ``discard PATH``) drops from the review
record every recorded entry that is gone from the upper, not only those it removed itself;
an entry unlinked after review by another writer leaves the record with it, and the next
``workspace commit`` applies the rest of the reviewed change set alone (pass 23's finding,
reopened by a partial commit in between).

The attack (overlay engine; the writer is a process of another session holding a
descriptor of the sandbox's ``conf``, attack pass 15): the real project holds
``conf/app.ini`` and ``conf/other.ini``. A call replaces the directory (``rm -rf conf; mkdir
conf``: overlay marks the new upper ``conf`` opaque), writes ``conf/app.ini`` with new bytes
and ``notes.txt``, and hands a descriptor of ``conf`` out. ``workspace status``/``diff``
show ``conf`` replaced, ``conf/app.ini`` with the new bytes and ``notes.txt`` added; all
recorded. The other process ``unlinkat``s ``app.ini`` (inside an opaque directory: no
whiteout) and exits (the in-use probe finds nothing held). The user commits ``notes.txt``
alone (``workspace commit notes.txt``): its check looks only at ``notes.txt``; then
``shown.forget_gone`` drops *every* recorded entry whose upper is gone -- ``conf/app.ini``
too, which that commit never touched. No call ran, so the record is still current, and it
no longer holds ``app.ini``. ``workspace commit``: ``shown.late`` finds nothing recorded
that is gone, ``conf`` (names never recorded) unchanged, and the opaque directory's prune
deletes the real ``conf/app.ini``.

Review showed: ``conf/app.ini`` rewritten with "reviewed new settings". Commit did: deleted
the user's real ``conf/app.ini`` (an unreviewed deletion). Severity: major (the same class
as pass 23's major finding; needs a writer after review, a partial commit between).

Rule that would close the class: the record forgets only what the command that ran removed
by its own hand (the entries it applied or dropped, as it planned them), never "whatever is
gone now"; or an opaque directory records its names, so a prune deletes only what review
showed going.
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
go, _ = s.accept()
go.recv(10)
os.unlink("app.ini", dir_fd=fds[0])
print("unlinked", flush=True)
"""

REPLACE_AND_SEND = """
import os, shutil, socket, sys, time
shutil.rmtree("conf")
os.mkdir("conf")
with open("conf/app.ini", "w") as f:
    f.write("reviewed new settings\\n")
with open("notes.txt", "w") as f:
    f.write("notes\\n")
for _ in range(200):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect("\\0" + sys.argv[1])
        break
    except OSError:
        s.close()
        time.sleep(0.1)
socket.send_fds(s, [b"dir"], [os.open("conf", os.O_RDONLY | os.O_DIRECTORY)])
print("sent", flush=True)
"""


def _real_conf(project: Path, account: accounts.Account) -> None:
    conf = project / "conf"
    conf.mkdir()
    (conf / "app.ini").write_text("the user's settings\n")
    (conf / "other.ini").write_text("other\n")
    account.chown(conf, conf / "app.ini", conf / "other.ini")


@pytest.mark.parametrize("between", ["commit", "discard"])
@pytest.mark.parametrize("ids", ID_SETUPS)
def test_a_partial_commit_does_not_forget_an_entry_unlinked_after_review(
        ids: str, between: str, tmp_path: Path) -> None:
    account, env = account_for(ids, tmp_path)
    _real_conf(account.project, account)
    other = account.base / "other"
    other.mkdir()
    account.chown(other)
    name = f"ws-attack24-{uuid.uuid4().hex[:12]}"
    full = account.env(**env)
    receiver = subprocess.Popen(
        [*account.prefix, "env", *(f"{k}={v}" for k, v in full.items()), account.python, "-m",
         "manager", "run", "--project", str(other), "--", "python3", "-c", RECEIVE, name],
        cwd=other, env=full, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        sent = account.ws("run", "--", "python3", "-c", REPLACE_AND_SEND, name, env=env,
                          timeout=60)
        assert "sent" in sent.stdout, sent
        review = account.ws("status", "--json", env=env, check=True).stdout
        assert "app.ini" in review and "notes.txt" in review, review
        shown = account.ws("diff", "--no-pager", env=env, check=True).stdout
        assert "reviewed new settings" in shown, shown
        say(name)
        out, err = receiver.communicate(timeout=60)
        assert "unlinked" in out, (out, err)
        notes = str(account.project / "notes.txt")
        first = account.ws(*(["commit", notes] if between == "commit"
                             else ["discard", "--yes", notes]), env=env, timeout=60)
        assert first.returncode == 0, first
        done = account.ws("commit", env=env, timeout=60)
        app = account.project / "conf/app.ini"
        assert app.exists(), (
            f"commit deleted conf/app.ini, which review showed rewritten (unlinked after "
            f"review, then forgotten by `{between} notes.txt`): review said {review!r}; "
            f"commit said {done.stdout!r} {done.stderr!r}")
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait(timeout=10)
        accounts.clean(account)
