"""Attack pass 23: an entry review showed inside an opaque directory is removed from the
upper after review; commit's vet ignores it ("no longer pending") and the opaque
directory's prune then deletes the real file review showed as being rewritten.

The attack (overlay and try: the record is checked by name, every engine since pass 22):
a call replaces a real directory (``rm -rf conf && mkdir conf``: overlay marks the new
upper ``conf`` opaque) and writes ``conf/app.ini`` with new, harmless content. Review
(``workspace status`` / ``diff``) shows ``conf`` replaced and ``conf/app.ini`` with the
reviewed bytes, and records both entries. After review a process outside the session
(handed a descriptor of ``conf`` over an abstract unix socket, attack pass 15) unlinks
``app.ini``: inside an opaque directory overlay removes the upper entry and writes no
whiteout (nothing below is merged). ``workspace commit``: the record's ``conf/app.ini``
is no longer among the changes commit reads, and ``shown.late`` ignores recorded entries
that are no longer pending (pass 22's change 2); ``conf`` itself is unchanged (its mode and
opaque mark; its list of names is never recorded). ``make_plan`` -> ``_plan_prune``
removes every real entry below ``conf`` absent from the upper *at planning time*: the real
``conf/app.ini`` is deleted. Review showed it kept, with new bytes.

Promise broken: what commit applies is exactly what review showed (here a deletion no
review showed: the user's real file is gone).

Rule that would close the class: what a step derives from the upper beyond its own entry
is vetted too: an opaque (or replacing) directory's prune removes exactly the real entries
review showed going -- record the names of each opaque directory the review read (or, in
``late``, a recorded entry now gone is refused when commit still acts on its real path:
a prune, a remove), rather than "no longer pending: nothing to refuse".
"""

from __future__ import annotations

import os

from manager.changes.model import Change
from manager.changes.model import read_changes
from manager.commit import apply
from manager.errors import WorkspaceError
from manager.session import shown
from tests.overlay_model import Tree
from tests.overlay_model import opaque_dir
from tests.overlay_model import write


def test_an_entry_gone_from_an_opaque_directory_after_review_is_not_a_deletion(tree: Tree) -> None:
    write(tree.r("conf/app.ini"), "the user's settings\n")
    write(tree.r("conf/other.ini"), "other\n")
    opaque_dir(tree.u("conf"))
    write(tree.u("conf/app.ini"), "reviewed new settings\n")

    reviewed = read_changes(tree.layers, tree.real)
    files = shown.digests(reviewed)
    record = shown.Review(files, {upper for upper, _, _ in files})
    assert str(tree.r("conf/app.ini")) in {real for _, real, _ in files}

    # After review: a process of another session unlinks the entry through the overlay
    # (an opaque directory: the upper entry goes, no whiteout).
    os.unlink(tree.u("conf/app.ini"))

    vetted: list[list[str]] = []

    def vet(changes: list[Change]) -> None:   # as manager/commands/commit.py's vet
        late = shown.late(record, changes)
        vetted.append(late)
        if late:
            raise WorkspaceError(f"changed after review: {late}")

    try:
        result = apply.commit(tree.session, tree.layers, tree.real, vet=vet)
    except WorkspaceError:
        result = None
    assert tree.r("conf/app.ini").exists(), (
        "commit deleted the real conf/app.ini, which review showed rewritten, not deleted: "
        f"the vet found {vetted}; result: {result.as_json() if result else None}")


def test_a_reviewed_move_is_not_committed_as_a_deletion(tree: Tree) -> None:
    """The same class without an opaque directory: review showed a move (``policy.conf``
    deleted, ``archive/policy.conf`` added); after review the added copy is unlinked (an
    added file: no whiteout). Before pass 22's change 2 the recorded entry, gone, was refused
    (``shown.changed`` compared every recorded entry); now it is ignored, and commit applies
    only the deletion: the file is gone from everywhere, which no review showed."""
    from tests.overlay_model import whiteout

    write(tree.r("policy.conf"), "deny all\n")
    write(tree.r("archive/README"), "old things\n")
    whiteout(tree.u("policy.conf"))
    write(tree.u("archive/policy.conf"), "deny all\n")

    reviewed = read_changes(tree.layers, tree.real)
    files = shown.digests(reviewed)
    record = shown.Review(files, {upper for upper, _, _ in files})

    os.unlink(tree.u("archive/policy.conf"))   # after review, through a held descriptor

    def vet(changes: list[Change]) -> None:
        late = shown.late(record, changes)
        if late:
            raise WorkspaceError(f"changed after review: {late}")

    try:
        result = apply.commit(tree.session, tree.layers, tree.real, vet=vet)
    except WorkspaceError:
        result = None
    assert tree.r("policy.conf").exists() or tree.r("archive/policy.conf").exists(), (
        "commit deleted policy.conf and never added archive/policy.conf: review showed a "
        f"move, commit applied a deletion; result: {result.as_json() if result else None}")
