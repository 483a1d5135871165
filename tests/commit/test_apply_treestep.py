"""A new directory is planned, journaled and published as one tree step; what it holds is
still judged path by path where that matters (a path named, a conflict, a special file,
a copy where a rename cannot go, a resumed commit)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from manager.changes.model import read_changes
from manager.commit import journal
from manager.commit.apply import Progress
from manager.commit.apply import commit
from manager.commit.journal import Journal
from manager.commit.journal import Step
from tests.commit.test_apply_crash import upper_roots
from tests.commit.test_apply_treemove import PAST
from tests.commit.test_apply_treemove import build_new_tree
from tests.commit.test_apply_treemove import overlay_marks
from tests.overlay_model import Tree
from tests.overlay_model import snapshot
from tests.overlay_model import view
from tests.overlay_model import write

pytestmark = pytest.mark.as_user


Seen = list[list[tuple[str, str]]]


def journaled_steps(tree: Tree) -> tuple[Seen, Progress]:
    """A progress callback, and its record of the journal's steps read while the commit runs."""
    seen: Seen = []

    def progress(done: int, total: int, size: int) -> None:
        raw = json.loads(journal.path_for(tree.session).read_text())
        seen.append([(s["action"], os.path.relpath(s["path"], tree.real)) for s in raw["steps"]])
    return seen, progress


def test_new_tree_is_one_journaled_step(tmp_path: Path) -> None:
    tree = Tree.make(tmp_path / "t")
    top = build_new_tree(tree)
    for i in range(40):
        write(top / "many" / f"f{i}", f"{i}\n")
    expected = view(tree.upper, tree.real)
    seen, progress = journaled_steps(tree)
    result = commit(tree.session, tree.layers, tree.real, progress=progress)
    assert result.ok, result
    assert seen[-1] == [("tree", "new")]                    # one step, not 50
    assert len(result.applied_paths) == 50                  # each path still reported
    assert snapshot(tree.real) == expected
    assert os.stat(tree.r("new/sub")).st_mtime_ns == PAST
    assert overlay_marks(tree.real) == []
    assert read_changes(tree.layers, tree.real) == []


def test_path_inside_a_new_tree_commits_just_that_path(tmp_path: Path) -> None:
    tree = Tree.make(tmp_path / "t")
    build_new_tree(tree)
    result = commit(tree.session, tree.layers, tree.real, [tree.r("new/sub/run.sh")])
    assert result.ok, result
    assert sorted(result.applied_paths) == [str(tree.r(p)) for p in
                                            ("new", "new/sub", "new/sub/run.sh")]
    assert tree.r("new/sub/run.sh").read_text() == "#!/bin/sh\n"
    assert sorted(os.listdir(tree.r("new"))) == ["sub"]
    pending = {str(c.path.relative_to(tree.real)) for c in read_changes(tree.layers, tree.real)}
    assert {"new/a.txt", "new/sub/deeper/b", "new/empty", "new/moved-in"} <= pending


def test_made_outside_meanwhile_is_judged_path_by_path(tmp_path: Path) -> None:
    """The real directory appeared after the sandbox made its own: merged entry by entry,
    the one file made outside too is a conflict, the rest arrive."""
    tree = Tree.make(tmp_path / "t")
    os.unlink(build_new_tree(tree) / "moved-in")   # (a copy-up: its own conflict rule)
    write(tree.r("new/sub/deeper/b"), "made outside\n")
    result = commit(tree.session, tree.layers, tree.real)
    assert [c.path for c in result.conflicts] == [tree.r("new/sub/deeper/b")]
    assert tree.r("new/sub/deeper/b").read_text() == "made outside\n"
    assert tree.r("new/sub/run.sh").read_text() == "#!/bin/sh\n"
    assert [c.path for c in read_changes(tree.layers, tree.real)] == [tree.r("new/sub/deeper/b")]


def test_special_file_in_a_new_tree_is_refused_alone(tmp_path: Path) -> None:
    tree = Tree.make(tmp_path / "t")
    build_new_tree(tree)
    write(tree.u("new/sub/tool"), "#!/bin/sh\n", 0o4755)
    os.mkfifo(tree.u("new/pipe"))
    result = commit(tree.session, tree.layers, tree.real)
    assert [r.path for r in result.refused] == [tree.r("new/sub/tool")]
    assert "setuid" in result.refused[0].reason
    assert not os.path.lexists(tree.r("new/sub/tool"))
    assert tree.r("new/sub/run.sh").read_text() == "#!/bin/sh\n"
    assert os.path.exists(tree.r("new/pipe"))


def test_tree_copied_whole_across_filesystems(tmp_path: Path) -> None:
    """Where a rename cannot go, a copy beside the destination is renamed into place:
    modes, times, content xattrs as a rename keeps them; no overlay mark; no stray copy."""
    tree = Tree.make(tmp_path / "t")
    upper_root = upper_roots(tmp_path, "other-fs")
    upper_root.mkdir()
    tree.upper = upper_root / "upper"
    try:
        build_new_tree(tree)
        expected = view(tree.upper, tree.real)
        seen, progress = journaled_steps(tree)
        result = commit(tree.session, tree.layers, tree.real, progress=progress)
        assert result.ok, result
        assert seen[-1] == [("tree", "new")]
        assert snapshot(tree.real) == expected
        for rel in ("new", "new/sub", "new/sub/deeper", "new/empty"):
            assert os.stat(tree.r(rel)).st_mtime_ns == PAST, rel
        assert os.getxattr(tree.r("new/a.txt"), "user.note") == b"kept"
        assert overlay_marks(tree.real) == []
        assert os.listdir(tree.real) == ["new"]
        assert read_changes(tree.layers, tree.real) == []
    finally:
        shutil.rmtree(upper_root)


def test_resumed_tree_step_found_in_place_is_finished_entry_by_entry(tmp_path: Path) -> None:
    """Killed after its copy was renamed in, before the upper tree went: both are there.
    The resumed step leaves it to the fresh plan, which finds every entry already applied."""
    tree = Tree.make(tmp_path / "t")
    build_new_tree(tree)
    expected = view(tree.upper, tree.real)
    shutil.copytree(tree.u("new"), tree.r("new"), symlinks=True)
    journal.write(tree.session, Journal("abc", tree.layers,
                                        [Step("tree", 0, str(tree.r("new")), str(tree.u("new")))],
                                        False))
    result = commit(tree.session, tree.layers, tree.real)
    assert result.ok and not result.conflicts, result
    assert snapshot(tree.real) == expected
    assert read_changes(tree.layers, tree.real) == []
    assert not journal.path_for(tree.session).exists()
