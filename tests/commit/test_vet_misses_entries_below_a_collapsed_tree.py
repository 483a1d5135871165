"""Attack pass 22: commit's check against the review record (``apply.Vet``) cannot see an
entry added below a new directory that commit collapses into one tree step.

The attack (overlay and try: the record is checked by name, ``shown.Review.names``, because
no time says what changed): a call makes ``new/a`` and hands a descriptor of ``new`` to a
process of another session (attack pass 15). ``workspace status`` records ``new`` and
``new/a`` (review walks every entry below a new directory). That process then creates
``new/evil`` and exits (so the in-use probe finds nothing held). ``workspace commit`` reads
the changes with ``collapse=collector``: ``new`` is one ``Change`` with ``below=None`` and
nothing below it, and that list is what ``vet`` gets. ``shown.late`` -> ``added`` ->
``_entries`` yields ``below`` entries only for a change whose ``below`` is set, so it sees
only ``new`` (recorded) and finds nothing added; ``changed`` compares the recorded entries
(``new``'s mode, xattrs: unchanged by a new child; ``new/a``: unchanged). The tree step's
census then counts ``new/evil`` in, and it is copied into the real tree: committed, never
shown.

Promise broken: what commit applies is exactly what review showed.

Rule that would close the class: the vet is asked of every entry commit applies, those a
tree step carries included (hand it the expanded changes: ``trees.expanded(changes,
collector.trees)``, or have ``_entries`` walk each new directory whatever its ``below``);
equivalently, a tree step's census must be a subset of the recorded names.
"""

from __future__ import annotations

from pathlib import Path

from manager.changes.model import Change
from manager.changes.model import read_changes
from manager.commit import apply
from manager.errors import WorkspaceError
from manager.session import shown
from tests.overlay_model import Tree
from tests.overlay_model import write


def test_an_entry_added_below_a_new_tree_after_review_is_refused(tree: Tree) -> None:
    write(tree.u("new/a"), "reviewed\n")
    # What review (status, diff) records: every upper entry of the changes, by name.
    reviewed = read_changes(tree.layers, tree.real)
    files = shown.digests(reviewed)
    record = shown.Review(files, {upper for upper, _, _ in files})
    assert {real for _, real, _ in files} == {str(tree.r("new")), str(tree.r("new/a"))}

    # After review: a process outside the session adds an entry below the new directory.
    write(tree.u("new/evil"), "never shown\n")

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
    assert not Path(tree.r("new/evil")).exists(), (
        "commit applied new/evil, which no review showed: the vet saw "
        f"{vetted} (it was handed the collapsed tree only); result: "
        f"{result.as_json() if result else None}")
