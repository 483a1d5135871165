"""Every (upper entry x real entry) pair, as in binpash/try's TRYCASE matrix.

The invariant: after a commit the real tree equals the overlay's view before it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from manager.changes.model import read_changes
from manager.commit.apply import commit
from tests.overlay_model import Tree
from tests.overlay_model import opaque_dir
from tests.overlay_model import snapshot
from tests.overlay_model import symlink
from tests.overlay_model import view
from tests.overlay_model import whiteout
from tests.overlay_model import write


def real_file(p: Path) -> None:
    write(p, "old\n")


def real_dir(p: Path) -> None:
    write(p / "old_child", "old child\n")
    write(p / "both", "real both\n")
    write(p / "sub" / "deep", "deep\n")


def real_symlink(p: Path) -> None:
    symlink(p, "old_target")


def real_missing(p: Path) -> None:
    pass


def up_file(p: Path) -> None:
    write(p, "new\n", mode=0o755)


def up_dir(p: Path) -> None:
    write(p / "new_child", "new child\n")
    write(p / "both", "upper both\n")


def up_opaque(p: Path) -> None:
    opaque_dir(p)
    up_dir(p)


def up_symlink(p: Path) -> None:
    symlink(p, "new_target")


def up_whiteout(p: Path) -> None:
    whiteout(p)


def up_xattr_whiteout(p: Path) -> None:
    whiteout(p, xattr=True)


REALS: dict[str, Callable[[Path], None]] = {
    "file": real_file, "dir": real_dir, "symlink": real_symlink, "missing": real_missing}
UPPERS: dict[str, Callable[[Path], None]] = {
    "file": up_file, "dir": up_dir, "opaque": up_opaque, "symlink": up_symlink,
    "whiteout": up_whiteout, "xattr-whiteout": up_xattr_whiteout}


@pytest.mark.parametrize("real_kind", REALS)
@pytest.mark.parametrize("upper_kind", UPPERS)
@pytest.mark.parametrize("depth", ["top", "nested"])
def test_commit_matches_view(tree: Tree, upper_kind: str, real_kind: str, depth: str) -> None:
    rel = "x" if depth == "top" else "d/e/x"
    write(tree.r("untouched"), "same\n")
    REALS[real_kind](tree.r(rel))
    tree.r(rel).parent.mkdir(parents=True, exist_ok=True)
    UPPERS[upper_kind](tree.u(rel))
    expected = view(tree.upper, tree.real)

    result = commit(tree.session, tree.layers, tree.real)

    assert result.ok, result
    assert snapshot(tree.real) == expected
    assert read_changes(tree.layers, tree.real) == []
    assert not (tree.session / "commit-journal.json").exists()


@pytest.mark.parametrize("upper_kind", ["file", "dir", "opaque", "symlink"])
def test_upper_entries_are_gone_after_commit(tree: Tree, upper_kind: str) -> None:
    real_dir(tree.r("p/x"))
    UPPERS[upper_kind](tree.u("p/x"))
    commit(tree.session, tree.layers, tree.real)
    assert list(tree.upper.iterdir()) == []


def test_parents_before_children_deep_new_tree(tree: Tree) -> None:
    for i in range(3):
        write(tree.u(f"a/b{i}/c/d/file{i}"), f"{i}\n")
    expected = view(tree.upper, tree.real)
    commit(tree.session, tree.layers, tree.real)
    assert snapshot(tree.real) == expected


def test_real_changed_type_since_is_conflict_not_overwritten(tree: Tree) -> None:
    real_file(tree.r("x"))
    up_dir(tree.u("x"))
    time.sleep(0.02)
    tree.r("x").unlink()
    symlink(tree.r("x"), "elsewhere")
    result = commit(tree.session, tree.layers, tree.real)
    assert [c.path for c in result.conflicts][:1] == [tree.r("x")]
    assert tree.r("x").is_symlink()
