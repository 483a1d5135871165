"""Attack pass 22: ``workspace commit PATH`` applies the new parent directories PATH cannot
exist without (``plan.with_parents``), but its checks against review look only at PATH.

``shown.late(seen, found, paths)`` compares only recorded entries ``_within`` ``paths``, and
``commands/commit.py`` ``_refuse_unreviewed`` drops every late path not within ``paths``.
``make_plan`` then adds each added parent directory of a selected path as a ``dir`` step,
which applies that directory's mode, owner and xattrs as the upper holds them at commit.

The attack: a call makes ``new/a`` (review shows ``new/`` 0755 and ``new/a``). After review a
writer the record exists for (a process a container call left running; a process of another
session holding a descriptor of ``new``, attack pass 15) runs ``chmod 2777 new`` (or sets an
xattr on it). ``workspace commit new/a``: the vet finds nothing late within ``new/a``, and
the real ``new`` is made 2777, world-writable and setgid, never shown.

Promise broken: what commit applies is exactly what review showed.

Rule that would close the class: the check against review covers every entry the plan
applies (each step's path, the parents ``with_parents`` brings included), not the paths the
user named.
"""

from __future__ import annotations

import contextlib
import os
import stat

from manager.changes.model import Change
from manager.changes.model import read_changes
from manager.commit import apply
from manager.errors import WorkspaceError
from manager.session import shown
from tests.overlay_model import Tree
from tests.overlay_model import write


def test_the_parent_a_named_path_brings_is_vetted_too(tree: Tree) -> None:
    write(tree.u("new/a"), "reviewed\n")
    tree.u("new").chmod(0o755)
    files = shown.digests(read_changes(tree.layers, tree.real))   # what review records
    record = shown.Review(files, {upper for upper, _, _ in files})

    tree.u("new").chmod(0o2777)   # after review, by a writer outside any call
    paths = [tree.r("new/a")]

    def vet(changes: list[Change]) -> None:   # as manager/commands/commit.py's vet
        late = shown.late(record, changes)
        if late:
            raise WorkspaceError(f"changed after review: {late}")

    with contextlib.suppress(WorkspaceError):
        apply.commit(tree.session, tree.layers, tree.real, paths, vet=vet)
    mode = stat.S_IMODE(os.lstat(tree.r("new")).st_mode) if tree.r("new").exists() else None
    assert mode in (None, 0o755), (
        f"commit new/a made the real new/ mode {mode:o}; review showed 755 and the vet, "
        "asked only about new/a, never compared it")
