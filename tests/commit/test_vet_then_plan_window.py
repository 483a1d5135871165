"""Attack pass 22: commit's check against the review record and its plan's fingerprint are
two reads of the upper; what changes between them is judged and copied, never vetted.

``apply.commit`` (and ``commit_session``) calls ``vet(changes)``: ``shown.late`` reads each
recorded entry's digest. Then it settles the trees and plans, and the plan takes each step's
fingerprint (``plan._judged``) from the upper as it is *then*. The executor copies an entry
while it matches that fingerprint. A write between the vet's read and the plan's fingerprint
(a live writer: test_apply_judged.py's model; the in-use probe keeps overlay's out, the
container engines' overlays are not probed) is in the fingerprint, so it is copied: the
review showed ``reviewed``, the vet read ``reviewed``, the real file says ``unreviewed``.
(The pass-21 fingerprint closes plan-to-copy; nothing closes vet-to-plan.)

Promise broken: what commit applies is exactly what review showed.

Rule that would close the class: the fingerprint and the vet are of one read: take each
entry's fingerprint first, vet, and require the fingerprint unchanged after the vet (or vet
the plan's steps, reading each entry's content through the descriptor the copy uses).
"""

from __future__ import annotations

import contextlib
import shutil

from manager.changes.model import Change
from manager.changes.model import read_changes
from manager.commit import apply
from manager.errors import WorkspaceError
from manager.session import shown
from tests.overlay_model import Tree
from tests.overlay_model import write


def test_a_write_between_the_vet_and_the_plan_is_not_committed(tree: Tree) -> None:
    write(tree.r("notes.txt"), "real\n")
    tree.u("notes.txt").parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(tree.r("notes.txt"), tree.u("notes.txt"))
    tree.u("notes.txt").write_text("reviewed\n")
    files = shown.digests(read_changes(tree.layers, tree.real))   # review's record
    record = shown.Review(files, {upper for upper, _, _ in files})

    def vet(changes: list[Change]) -> None:   # as manager/commands/commit.py's vet
        late = shown.late(record, changes)
        if late:
            raise WorkspaceError(f"changed after review: {late}")
        tree.u("notes.txt").write_text("unreviewed\n")   # the live writer, just after it

    with contextlib.suppress(WorkspaceError):
        apply.commit(tree.session, tree.layers, tree.real, vet=vet)
    assert tree.r("notes.txt").read_text() in ("real\n", "reviewed\n"), (
        "commit applied content written after its vet read the file: "
        f"{tree.r('notes.txt').read_text()!r}")
