"""Attack pass 25: ``shown.forget_gone`` forgets every gone entry at or below a path the
command applied; ``commit PATH`` applies a new parent directory it needs (``with_parents``),
so a sibling of PATH in that new directory -- one the commit's check never looked at (not
named, not applied) -- leaves the review record when another writer unlinked it after
review, and the next ``workspace commit`` applies the rest of a reviewed move alone: a
deletion of the user's file.

The attack (overlay engine; the writer is a process of another session holding a
descriptor of the sandbox's new directory, attack pass 15): the real project holds
``src/old.py``. A call moves it into a new package (``mkdir newpkg; mv src/old.py
newpkg/old.py``), adds ``newpkg/README``, and hands a descriptor of ``newpkg`` out.
``workspace status``/``diff`` show ``src/old.py`` deleted and ``newpkg/`` added holding
``old.py`` (the user's code) and ``README``: a move; all recorded. The other process
``unlinkat``s ``newpkg/old.py`` (a new directory: no whiteout) and exits. The user commits the
README first (``workspace commit newpkg/README``): ``shown.late`` checks the entries named
and applied (``newpkg/README``, the new parent ``newpkg``), not ``newpkg/old.py``; then
``forget_gone(session, applied_paths)`` drops ``newpkg/old.py`` -- gone, and *below*
``newpkg``, an applied path (the new parent), though that commit never touched it. No call
ran, the record is current and no longer holds it: ``workspace commit`` finds nothing
recorded gone and applies the whiteout of ``src/old.py``.

Review showed: ``old.py`` moved into ``newpkg``. Commit did: deleted the real ``src/old.py``
and created no copy (the user's file is gone). Severity: major (pass 23's and 24's class,
reopened by the "at or below an applied path" allowance through a new parent).

Rule that would close the class: forget only the upper entries the command itself removed
(the steps' own upper entries and those a tree step carried, the entries discard dropped,
the directories tidy removed -- collected by the executor / tidy, not inferred from real
paths), or compare the record's gone entries at or below an applied *parent* as commit
applies them (``late`` over every recorded entry below each applied directory).
"""

from __future__ import annotations

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

MOVE_AND_SEND = """
import os
os.mkdir("newpkg")
os.rename("src/old.py", "newpkg/old.py")
with open("newpkg/README", "w") as f:
    f.write("the new package\\n")
SENT = "newpkg"
""" + SEND_DIRECTORY


@pytest.mark.parametrize("ids", ID_SETUPS)
def test_commit_path_with_a_new_parent_does_not_forget_a_sibling_unlinked_after_review(
        ids: str, tmp_path: Path) -> None:
    account, env = account_for(ids, tmp_path)
    src = account.project / "src"
    src.mkdir()
    (src / "old.py").write_text("the user's code\n")
    account.chown(src, src / "old.py")
    name = f"ws-attack25-{uuid.uuid4().hex[:12]}"
    receiver = other_session(account, env, UNLINK_WHEN_TOLD, name, "old.py")
    try:
        sent = account.ws("run", "--", "python3", "-c", MOVE_AND_SEND, name, env=env,
                          timeout=60)
        assert "sent" in sent.stdout, sent
        review = account.ws("status", "--json", env=env, check=True).stdout
        assert "newpkg" in review and "old.py" in review, review
        shown = account.ws("diff", "--no-pager", env=env, check=True).stdout
        assert "the user's code" in shown, shown   # the copy in newpkg, shown
        say(name)
        out, err = receiver.communicate(timeout=60)
        assert "unlinked" in out, (out, err)
        readme = str(account.project / "newpkg/README")
        first = account.ws("commit", readme, env=env, timeout=60)
        assert first.returncode == 0, first
        done = account.ws("commit", env=env, timeout=60)
        kept = [p for p in (src / "old.py", account.project / "newpkg/old.py") if p.exists()]
        assert kept, (
            "commit deleted src/old.py and created no newpkg/old.py: review showed a move "
            "(the copy unlinked after review, then forgotten by `commit newpkg/README`, "
            f"whose new parent newpkg it lies below): review said {review!r}; commit said "
            f"{done.stdout!r} {done.stderr!r}")
    finally:
        stop(receiver)
        accounts.clean(account)
