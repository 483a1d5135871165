"""The review record: what the last review read is reused only while the entries it was
read from are unchanged, so a cached review never shows a stale verdict."""

from __future__ import annotations

import os
import time

import pytest

from manager.changes import walkcache
from manager.changes.model import Change
from manager.changes.model import Kind
from manager.changes.model import read_changes
from manager.changes.walkcache import WalkCache
from tests.overlay_model import Tree
from tests.overlay_model import next_stamp
from tests.overlay_model import write

pytestmark = pytest.mark.as_user   # (it ran as the user in tests/review too)


@pytest.fixture
def trusted_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries count as settled as soon as they are written (not 2 s later), so a test
    can record them and then change them at once: what a slow edit would meet."""
    monkeypatch.setattr(walkcache, "RACY_NS", -10_000_000_000)


def review(tree: Tree, summarize: int | None = 0) -> tuple[list[Change], WalkCache]:
    cache = WalkCache(str(tree.session / "review.cache"), ("test", str(tree.upper)))
    found = read_changes(tree.layers, tree.real, summarize, cache)
    cache.save()
    return found, cache


def kinds(found: list[Change], tree: Tree) -> dict[str, tuple[Kind, int | None]]:
    return {os.path.relpath(c.real_path, tree.real): (c.kind, c.below) for c in found}


def test_a_same_size_edit_of_either_side_is_seen_after_a_recorded_review(
        tree: Tree, trusted_now: None) -> None:
    write(tree.r("a.txt"), "one\n")
    write(tree.u("a.txt"), "two\n")
    found, cache = review(tree)
    assert kinds(found, tree) == {"a.txt": (Kind.MODIFIED, None)}
    assert cache.changed and (tree.session / "review.cache").exists()

    next_stamp(tree.root)
    write(tree.u("a.txt"), "one\n")   # the sandbox puts the content back: no change
    assert review(tree)[0] == []
    next_stamp(tree.root)
    write(tree.r("a.txt"), "six\n")   # the user edits the real file: a change again
    assert kinds(review(tree)[0], tree) == {"a.txt": (Kind.MODIFIED, None)}


def test_special_bits_set_after_a_recorded_review_are_shown(tree: Tree, trusted_now: None) -> None:
    write(tree.r("tool"), "#!/bin/sh\n")
    write(tree.u("tool"), "#!/bin/bash\n")
    assert review(tree)[0][0].special == ()
    next_stamp(tree.root)
    tree.u("tool").chmod(0o4755)
    (change,) = review(tree)[0]
    assert change.special == ("setuid",)


def test_a_new_directory_count_follows_added_and_removed_files(
        tree: Tree, trusted_now: None) -> None:
    for i in range(5):
        write(tree.u(f"out/a/{i}.o"), "x")
    write(tree.u("out/b/c/deep.o"), "x")
    assert kinds(review(tree)[0], tree) == {"out": (Kind.ADDED, 6)}
    assert review(tree)[1].old, "the second review found a record"

    next_stamp(tree.root)
    write(tree.u("out/b/c/more.o"), "x")
    (tree.upper / "out/a/0.o").unlink()
    (tree.upper / "out/a/sub").mkdir()
    write(tree.u("out/a/sub/x.o"), "x")
    assert kinds(review(tree)[0], tree) == {"out": (Kind.ADDED, 7)}


def test_entries_changed_in_the_last_moments_are_not_recorded(tree: Tree) -> None:
    write(tree.r("a.txt"), "one\n")
    write(tree.u("a.txt"), "two\n")
    write(tree.u("new/x.txt"), "x\n")
    found, cache = review(tree)
    assert len(found) == 2
    assert cache.new == {} and not (tree.session / "review.cache").exists()


def test_a_settled_entry_is_recorded_and_reused(tree: Tree) -> None:
    write(tree.r("a.txt"), "one\n")
    write(tree.u("a.txt"), "two\n")
    real_clock = time.time_ns
    with pytest.MonkeyPatch.context() as patch:   # 3 s later: the entries have settled
        patch.setattr(walkcache.time, "time_ns", lambda: real_clock() + 3_000_000_000)
        first = review(tree)[1]
    assert list(first.new) == [str(tree.upper / "a.txt")]
    second = review(tree)[1]
    assert second.new == second.old and not second.changed


def test_a_record_for_other_layers_a_damaged_one_or_an_unwritable_place_is_ignored(
        tree: Tree, trusted_now: None) -> None:
    write(tree.r("a.txt"), "one\n")
    write(tree.u("a.txt"), "two\n")
    review(tree)
    other = WalkCache(str(tree.session / "review.cache"), ("test", "elsewhere"))
    assert other.old == {}
    (tree.session / "review.cache").write_bytes(b"\x00not a record")
    assert kinds(review(tree)[0], tree) == {"a.txt": (Kind.MODIFIED, None)}
    nowhere = WalkCache(str(tree.root / "missing" / "review.cache"), ("test",))
    assert kinds(read_changes(tree.layers, tree.real, 0, nowhere), tree) == \
        {"a.txt": (Kind.MODIFIED, None)}
    nowhere.save()   # the directory does not exist: skipped, not raised
    assert not (tree.root / "missing").exists()
