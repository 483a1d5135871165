"""A directory the sandbox created is committed whole (one rename of a copy of its tree), or
entry by entry when anything in it needs more: never half of it, nothing published that was
not planned, never an inode of the upper's."""

from __future__ import annotations

import os
import random
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from manager.changes.model import read_changes
from manager.commit.apply import commit
from tests.commit.test_apply_crash import REPO
from tests.commit.test_apply_crash import SCRIPT
from tests.overlay_model import Tree
from tests.overlay_model import snapshot
from tests.overlay_model import symlink
from tests.overlay_model import view
from tests.overlay_model import write

pytestmark = pytest.mark.as_user   # an ordinary user's renames and owners differ from root's

PAST = 1_500_000_000_000_000_000   # 2017: a time no entry gets by being written now


def build_new_tree(tree: Tree) -> Path:
    """``new/`` as a sandbox leaves it: nested, modes, a symlink, an empty directory,
    a content xattr, and overlay marks (a copy-up moved in, an impure directory)."""
    top = tree.u("new")
    write(top / "a.txt", "a\n", 0o640)
    write(top / "sub" / "run.sh", "#!/bin/sh\n", 0o755)
    write(top / "sub" / "deeper" / "b", "b\n")
    (top / "empty").mkdir()
    symlink(top / "sub" / "link", "../a.txt")
    os.setxattr(top / "a.txt", "user.note", b"kept")
    write(top / "moved-in", "copied up, then moved here\n")
    os.setxattr(top / "moved-in", "user.overlay.origin", b"")
    os.setxattr(top / "sub", "user.overlay.impure", b"y")
    for folder in (top / "sub" / "deeper", top / "sub", top / "empty", top):
        os.utime(folder, ns=(PAST, PAST))
    return top


def overlay_marks(root: Path) -> list[str]:
    return [f"{d}/{n}: {x}" for d, dirs, files in os.walk(root) for n in dirs + files
            for x in os.listxattr(os.path.join(d, n), follow_symlinks=False)
            if ".overlay." in x]


def test_new_tree_is_published_whole_as_fresh_inodes(tmp_path: Path) -> None:
    """Whole (one rename of a copy), and never the upper's own inodes: an overlay of the
    sandbox still alive elsewhere reaches those wherever they go (attack passes 16, 18)."""
    tree = Tree.make(tmp_path / "t")
    write(tree.r("old.txt"), "real\n")
    top = build_new_tree(tree)
    uppers = {os.lstat(p).st_ino for p in [top, *top.rglob("*")]}
    expected = view(tree.upper, tree.real)
    result = commit(tree.session, tree.layers, tree.real)
    assert result.ok, result
    real = tree.r("new")
    assert not uppers & {os.lstat(p).st_ino for p in [real, *real.rglob("*")]}
    assert snapshot(tree.real) == expected
    assert len(result.applied) == 9                         # every entry reported, one by one
    assert read_changes(tree.layers, tree.real) == []
    for rel in ("new", "new/sub", "new/sub/deeper", "new/empty"):
        assert os.stat(tree.r(rel)).st_mtime_ns == PAST, rel
    assert os.getxattr(tree.r("new/a.txt"), "user.note") == b"kept"
    assert overlay_marks(tree.real) == []                   # overlayfs's marks stay behind


def test_read_only_new_tree(tmp_path: Path) -> None:
    """npm's cache shape: read-only files in read-only directories (an ordinary user cannot
    rename a read-only directory to another parent: it goes entry by entry then)."""
    tree = Tree.make(tmp_path / "t")
    for i in range(3):
        write(tree.u(f"cache/ro/f{i}"), f"{i}\n", 0o444)
    for folder in ("cache/ro", "cache"):
        tree.u(folder).chmod(0o555)
    expected = view(tree.upper, tree.real)
    result = commit(tree.session, tree.layers, tree.real)
    assert result.ok, result
    assert snapshot(tree.real) == expected
    assert read_changes(tree.layers, tree.real) == []
    for folder in ("cache/ro", "cache"):
        tree.r(folder).chmod(0o755)   # so that pytest can remove it


def odd_entry(tree: Tree, case: str) -> list[str]:
    """Put in ``new/`` one entry a rename of the tree must not carry; the exclude patterns."""
    top = tree.u("new")
    if case == "hard link":
        os.link(top / "a.txt", top / "sub" / "twin")
    elif case == "whiteout":
        write(top / "sub" / "gone")
        os.setxattr(top / "sub" / "gone", "user.overlay.whiteout", b"y")
    elif case == "excluded":
        write(top / "sub" / "secret.key", "not for the real tree\n")
        return ["*.key"]
    elif case == "metacopy":
        write(top / "sub" / "meta", "")
        os.setxattr(top / "sub" / "meta", "user.overlay.metacopy", b"")
    return []


@pytest.mark.parametrize("case", ["hard link", "whiteout", "excluded", "metacopy"])
def test_tree_needing_more_goes_entry_by_entry(tmp_path: Path, case: str) -> None:
    tree = Tree.make(tmp_path / "t")
    top = build_new_tree(tree)
    inode = os.stat(top).st_ino
    exclude = odd_entry(tree, case)
    result = commit(tree.session, tree.layers, tree.real, exclude=exclude)
    assert os.stat(tree.r("new")).st_ino != inode
    assert tree.r("new/sub/deeper/b").read_text() == "b\n"
    assert os.stat(tree.r("new/sub/run.sh")).st_mode & 0o777 == 0o755
    if case == "hard link":
        assert result.ok and tree.r("new/sub/twin").read_text() == "a\n"
        assert os.stat(tree.r("new/sub/twin")).st_nlink == 1   # never shares the upper inode
    elif case == "whiteout":
        assert result.ok and not os.path.lexists(tree.r("new/sub/gone"))
    elif case == "excluded":
        assert result.skipped == [tree.r("new/sub/secret.key")]
        assert not os.path.lexists(tree.r("new/sub/secret.key"))
        assert (tree.u("new/sub/secret.key")).read_text() == "not for the real tree\n"
    else:
        assert [e.path for e in result.errors] == [tree.r("new/sub/meta")]
        assert "metacopy" in result.errors[0].reason
        assert not os.path.lexists(tree.r("new/sub/meta"))


def build_trees(tree: Tree) -> dict[str, set[str]]:
    """20 new trees of 40 files, then (in path order) 400 real files changed: the kill,
    soon after the journal is written, falls while the trees are being committed."""
    trees = {}
    for i in range(20):
        names = {f"s{j}/f{k}" for j in range(2) for k in range(20)}
        for name in names:
            write(tree.u(f"a{i}/{name}"), f"{i} {name}\n")
        trees[f"a{i}"] = names
    for i in range(400):
        write(tree.r(f"z/f{i}"), "old\n")
    for i in range(400):
        write(tree.u(f"z/f{i}"), "new\n")
    return trees


def whole_or_absent(tree: Tree, trees: dict[str, set[str]]) -> int:
    """Each new tree is absent or complete; how many are complete."""
    complete = 0
    for top, names in trees.items():
        root = tree.r(top)
        if not os.path.lexists(root):
            continue
        found = {os.path.relpath(os.path.join(d, n), root) for d, _, files in os.walk(root)
                 for n in files}
        assert found == names, f"{top} is half committed: {len(found)} of {len(names)} files"
        assert all(tree.r(f"{top}/{n}").read_text() == f"{top[1:]} {n}\n" for n in names)
        complete += 1
    return complete


def present(tree: Tree, trees: dict[str, set[str]]) -> int:
    return sum(os.path.lexists(tree.r(top)) for top in trees)


def kill_once_trees_appear(tree: Tree, trees: dict[str, set[str]], rng: random.Random) -> None:
    """Run a commit (or its resumption) and SIGKILL it just after the next new tree's
    directory appears in the real tree: the moment a half-committed tree would show."""
    before = present(tree, trees)
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(tree.session), str(tree.upper),
                             str(tree.real)], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    deadline = time.monotonic() + 30
    while present(tree, trees) == before and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.0005)
    time.sleep(rng.uniform(0.0, 0.005))
    proc.send_signal(signal.SIGKILL)
    proc.wait()


@pytest.mark.slow
def test_killed_commit_leaves_each_new_tree_whole_or_absent(tmp_path: Path) -> None:
    tree = Tree.make(tmp_path / "t")
    trees = build_trees(tree)
    expected = view(tree.upper, tree.real)
    rng = random.Random(20261128)
    for _ in range(3):
        kill_once_trees_appear(tree, trees, rng)
        whole_or_absent(tree, trees)
    result = commit(tree.session, tree.layers, tree.real)
    assert result.ok, result
    assert whole_or_absent(tree, trees) == 20
    assert snapshot(tree.real) == expected
    assert read_changes(tree.layers, tree.real) == []
    assert all(stat.S_ISDIR(os.lstat(tree.r(t)).st_mode) for t in trees)
