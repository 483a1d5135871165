"""Attack pass 23: a file review showed rewritten inside a replaced (opaque) directory is
deleted by commit, because the entry was unlinked from the upper after review and commit
treats a recorded entry that is no longer pending as nothing to refuse, while the opaque
directory's prune deletes every real entry absent from the upper.

The attack (overlay engine; try alike): the real project holds ``conf/app.ini`` and
``conf/other.ini``. A call replaces the directory (``rm -rf conf; mkdir conf``: overlay marks
the new upper ``conf`` opaque), writes ``conf/app.ini`` with harmless new bytes and hands a
descriptor of ``conf`` to a process of another session over an abstract unix socket (attack
pass 15). ``workspace status``/``diff`` show ``conf`` replaced and ``conf/app.ini`` with the
new bytes, and record both. The other process then ``unlinkat``s ``app.ini`` through the
descriptor (in an opaque directory overlay removes the upper entry, no whiteout) and exits,
so the in-use probe finds nothing held. ``workspace commit``: ``conf/app.ini`` is not among
the changes commit reads; ``shown.late`` ignores it ("no longer pending", pass 22); ``conf``'s
recorded attributes are unchanged (its names are never recorded); ``plan._plan_prune``
removes the real ``conf/app.ini`` (absent from the upper now). Review (diff) showed "a/conf
deleted with everything in it", then ``conf`` added with ``conf/app.ini`` holding the new bytes:
the end state it showed holds ``app.ini``; commit's has none, and says "committed 3 paths".
Before pass 22's change 2 the recorded entry, gone, was refused (``shown.changed`` compared
every recorded entry); now a reviewed change set is applied in part, silently (the general
form: tests/commit/test_vet_misses_a_prune_below_an_opaque_directory.py, a reviewed move
committed as a deletion).

The container engines' volume mode (record checked by name) fails the same way with a
call's background process as the writer.

Promise broken: what commit applies is exactly what review showed (an unreviewed deletion).

Rule that would close the class: a prune deletes only what review showed going: record an
opaque (replacing) directory's names, or refuse a recorded entry that is gone when commit
still acts on its real path (a prune below an opaque directory), instead of ignoring it.

Attack pass 24 reopened it with a partial command between the unlink and the commit:
``workspace commit notes.txt`` (or ``discard --yes notes.txt``) ran ``shown.forget_gone``,
which dropped every recorded entry that was gone, ``conf/app.ini`` too, and the plain
commit then pruned the real file (major). Fixed: a command forgets only what it removed
by its own hand (at or below what it applied or dropped, or a parent it tidied).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from tests.engines import accounts
from tests.security.two_sessions import ID_SETUPS
from tests.security.two_sessions import SEND_DIRECTORY
from tests.security.two_sessions import UNLINK_WHEN_TOLD
from tests.security.two_sessions import account_for
from tests.security.two_sessions import other_session
from tests.security.two_sessions import say
from tests.security.two_sessions import stop

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]

REPLACE_AND_SEND = """
import os, shutil
shutil.rmtree("conf")
os.mkdir("conf")
with open("conf/app.ini", "w") as f:
    f.write("reviewed new settings\\n")
with open("notes.txt", "w") as f:
    f.write("notes\\n")
SENT = "conf"
""" + SEND_DIRECTORY


def _real_conf(project: Path, account: accounts.Account) -> None:
    conf = project / "conf"
    conf.mkdir()
    (conf / "app.ini").write_text("the user's settings\n")
    (conf / "other.ini").write_text("other\n")
    account.chown(conf, conf / "app.ini", conf / "other.ini")


# Between the unlink and the commit, nothing, or (attack pass 24) a commit or a discard of
# another path, which forgot every recorded entry that was gone, this one too.
@pytest.mark.parametrize("between", ["nothing", "commit", "discard"])
@pytest.mark.parametrize("ids", ID_SETUPS)
def test_a_file_unlinked_in_a_replaced_directory_after_review_is_not_deleted(
        ids: str, between: str, tmp_path: Path) -> None:
    account, env = account_for(ids, tmp_path)
    _real_conf(account.project, account)
    name = f"ws-attack23-{uuid.uuid4().hex[:12]}"
    receiver = other_session(account, env, UNLINK_WHEN_TOLD, name, "app.ini")
    try:
        sent = account.ws("run", "--", "python3", "-c", REPLACE_AND_SEND, name, env=env,
                          timeout=60)
        assert "sent" in sent.stdout, sent
        review = account.ws("status", "--json", env=env, check=True).stdout
        assert "app.ini" in review, review
        shown = account.ws("diff", "--no-pager", env=env, check=True).stdout
        assert "reviewed new settings" in shown, shown
        say(name)
        out, err = receiver.communicate(timeout=60)
        assert "unlinked" in out, (out, err)
        notes = str(account.project / "notes.txt")
        if between != "nothing":
            first = account.ws(*(["commit", notes] if between == "commit"
                                 else ["discard", "--yes", notes]), env=env, timeout=60)
            assert first.returncode == 0, first
        done = account.ws("commit", env=env, timeout=60)
        app = account.project / "conf/app.ini"
        assert app.exists(), (
            f"commit deleted conf/app.ini, which review showed rewritten (the entry was "
            f"unlinked after review; between: {between} notes.txt): review said {review!r}; "
            f"commit said {done.stdout!r} {done.stderr!r}")
    finally:
        stop(receiver)
        accounts.clean(account)


from tests.engines.conftest import engine_cli  # noqa: E402
from tests.security.after_review import container_engine  # noqa: E402,F401 - the fixture
from tests.security.after_review import release  # noqa: E402

LATER = ("sh -c 't=0; while [ ! -e /dev/shm/go ] && [ $t -lt 300 ]; do sleep 0.1; t=$((t+1)); done; "
         "rm conf/app.ini; : > /dev/shm/done; sleep 60' >/dev/null 2>&1 </dev/null &")


@pytest.mark.as_user
def test_container_a_file_unlinked_in_a_replaced_directory_after_review_is_not_deleted(
        ws, project: Path, container_engine: str) -> None:  # noqa: F811
    conf = project / "conf"
    conf.mkdir()
    (conf / "app.ini").write_text("the user's settings\n")
    (conf / "other.ini").write_text("other\n")
    cli = engine_cli(container_engine)
    made = ws("run", "--", "sh", "-c", "rm -rf conf && mkdir conf && echo reviewed > conf/app.ini")
    if made.returncode != 0 and container_engine == "podman-volume" and os.geteuid() != 0:
        # Rootless podman's volume overlay cannot remove a directory of the project
        # (docs/containers.md): no directory is replaced, so there is nothing to attack.
        assert "Input/output error" in made.stderr and (conf / "app.ini").exists(), made
        return
    assert made.returncode == 0, made
    ws("run", "--", "sh", "-c", LATER, check=True)
    shown = ws("diff", "--no-pager", check=True).stdout + \
        ws("status", "--no-pager", check=True).stdout
    assert "app.ini" in shown, shown
    release(cli, "/dev/shm/done", what="the background process never ran")
    proc = ws("commit")
    assert (conf / "app.ini").exists(), (
        f"commit deleted conf/app.ini, which review showed rewritten (unlinked after review "
        f"by a process the call left running): {shown!r}; commit said {proc.stdout!r} "
        f"{proc.stderr!r}")
