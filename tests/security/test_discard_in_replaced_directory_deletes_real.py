"""Attack pass 24: ``workspace discard PATH`` of a file inside a directory the sandbox
replaced turns the sandbox's reviewed rewrite of it into a deletion of the real file.

The attack (overlay engine, any account; no writer after review needed): the real project
holds ``conf/app.ini`` and ``conf/other.ini``. A call regenerates the directory: ``rm -rf
conf && mkdir conf`` (overlay marks the new upper ``conf`` opaque), then writes new
``conf/app.ini`` and ``conf/other.ini``. ``workspace status``: ``replaced: conf/ (2 files)``;
``workspace diff``: both files with new bytes. The user does not want the agent's
``app.ini``: ``workspace discard --yes conf/app.ini`` ("discarded 1 change": the user's
``app.ini`` is to stay as it is), then ``workspace commit``. Discard removed the upper
``conf/app.ini``; the opaque ``conf`` still hides the real one, and commit's prune
(``plan._plan_prune``: every real child absent from the opaque upper) deletes the user's
real ``conf/app.ini``. ``shown.forget_gone`` dropped it from the record (removed "by
discard"), so the check against review has nothing to say.

Review showed: ``conf/app.ini`` rewritten; the user discarded that change. Commit did:
deleted the real ``conf/app.ini`` (a declined change became a deletion, nothing said so at
discard or commit). Severity: minor, debatable: review's own model is "``conf`` deleted
with everything in it, then added with ``app.ini`` (added) and ``other.ini``", and after the
discard it says "deleted with everything in it" + ``other.ini`` -- consistent with it; but
``discard PATH`` reads as "leave PATH as it is", status lists ``app.ini`` nowhere as a
deletion, and a real file the user chose to keep is lost (the agent need only regenerate a
directory, an ordinary pattern).

Fixed: discard refuses an entry below a replaced directory while a real entry is there
(``apply._refuse_hiding_real``); the directory is the unit, as ``commit -p`` offers it.

Rule that would close the class: dropping a change below an opaque (or replacing)
directory must leave the real entry as it is: discard refuses it alone (the unit is the
directory, as ``commit -p`` offers it), or it restores the real entry's view (copies it up,
or records the name as kept so the prune skips it) -- never leave a name the prune removes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("overlay_engine")


def test_discarding_a_file_in_a_replaced_directory_keeps_the_real_file(
        project: Path, ws, sandboxed) -> None:
    conf = project / "conf"
    conf.mkdir()
    (conf / "app.ini").write_text("the user's settings\n")
    (conf / "other.ini").write_text("other\n")
    sandboxed("rm -rf conf && mkdir conf && echo agent > conf/app.ini "
              "&& echo agent > conf/other.ini")
    review = ws("status", check=True).stdout + ws("diff", "--no-pager", check=True).stdout
    assert "app.ini" in review, review
    dropped = ws("discard", "--yes", str(conf / "app.ini"))
    # Refused (the directory is the unit): nothing dropped, the user told why.
    assert dropped.returncode != 0 and "replaced" in dropped.stderr, dropped
    assert "conf" in dropped.stderr and "as a whole" in dropped.stderr, dropped
    again = ws("diff", "--no-pager", check=True).stdout
    assert "agent" in again and "app.ini" in again, again
    ws("discard", "--yes", str(conf), check=True)     # the unit: the user's conf/ as it was
    assert (conf / "app.ini").read_text() == "the user's settings\n"
    sandboxed("rm -rf conf && mkdir conf && echo agent > conf/app.ini "
              "&& echo agent > conf/other.ini")
    ws("status", check=True)
    ws("diff", "--no-pager", check=True)
    done = ws("commit")
    assert (conf / "other.ini").read_text() == "agent\n", done
    assert (conf / "app.ini").exists(), (
        "commit deleted conf/app.ini, whose change the user discarded (review showed it "
        f"rewritten): review said {review!r}; discard said {dropped.stdout!r}; commit said "
        f"{done.stdout!r} {done.stderr!r}")
