"""Commit and discard: modes, renames, names, selection, exclusion, conflicts, symlink tricks."""

from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path

import pytest

from manager.changes.model import Kind
from manager.changes.model import read_changes
from manager.commit import journal
from manager.commit.apply import commit
from manager.commit.apply import discard
from manager.commit.plan import make_plan
from manager.commit.safefs import DirChain
from manager.commit.safefs import UnsafePath
from manager.errors import WorkspaceError
from tests.overlay_model import Tree
from tests.overlay_model import opaque_dir
from tests.overlay_model import snapshot
from tests.overlay_model import symlink
from tests.overlay_model import view
from tests.overlay_model import whiteout
from tests.overlay_model import write


def copy_up(tree: Tree, rel: str) -> Path:
    """What overlayfs does on first write: the real file, copied with its metadata."""
    tree.u(rel).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(tree.r(rel), tree.u(rel))
    os.setxattr(tree.u(rel), "user.overlay.origin", b"", follow_symlinks=False)  # as overlayfs marks it
    return tree.u(rel)


def do_commit(tree: Tree, *paths: str, **kw: object):  # type: ignore[no-untyped-def]
    return commit(tree.session, tree.layers, tree.real, [tree.r(p) for p in paths], **kw)  # type: ignore[arg-type]


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


# -- modes, renames, names --------------------------------------------------------


def test_file_mode_change(tree: Tree) -> None:
    write(tree.r("run.sh"), "echo hi\n", mode=0o644)
    copy_up(tree, "run.sh").chmod(0o755)
    assert [c.kind for c in read_changes(tree.layers, tree.real)] == [Kind.MODE]
    do_commit(tree)
    assert mode(tree.r("run.sh")) == 0o755
    assert tree.r("run.sh").read_text() == "echo hi\n"


def test_dir_mode_change_including_read_only(tree: Tree) -> None:
    write(tree.r("d/f"), "f\n")
    tree.u("d").mkdir()
    write(tree.u("d/g"), "g\n")
    tree.u("d").chmod(0o555)
    do_commit(tree)
    assert mode(tree.r("d")) == 0o555
    assert tree.r("d/g").read_text() == "g\n" and tree.r("d/f").exists()


def test_file_content_mtime_and_owner_preserved(tree: Tree) -> None:
    write(tree.r("f"), "old\n")
    up = copy_up(tree, "f")
    up.write_text("new\n")
    os.utime(up, ns=(1_000_000_000, 2_000_000_000))
    os.chown(up, 1234, 5678)
    do_commit(tree)
    st = os.lstat(tree.r("f"))
    assert (st.st_mtime_ns, st.st_uid, st.st_gid) == (2_000_000_000, 1234, 5678)


def test_directory_rename_is_whiteout_plus_new_dir(tree: Tree) -> None:
    for i in range(3):
        write(tree.r(f"old/f{i}"), f"{i}\n")
    whiteout(tree.u("old"))
    for i in range(3):
        write(tree.u(f"new/f{i}"), f"{i}\n")
    expected = view(tree.upper, tree.real)
    do_commit(tree)
    assert snapshot(tree.real) == expected
    assert not tree.r("old").exists() and sorted(os.listdir(tree.r("new"))) == ["f0", "f1", "f2"]


def test_unicode_and_space_names(tree: Tree) -> None:
    write(tree.r("dir with space/fïlé ☃.txt"), "old\n")
    write(tree.r("dir with space/gone ✗"), "bye\n")
    copy_up(tree, "dir with space/fïlé ☃.txt").write_text("new\n")
    write(tree.u("日本/名前 テスト"), "x\n")
    whiteout(tree.u("dir with space/gone ✗"))
    expected = view(tree.upper, tree.real)
    assert do_commit(tree).ok
    assert snapshot(tree.real) == expected


def test_non_utf8_name(tree: Tree) -> None:
    name = os.fsdecode(b"caf\xe9")
    write(tree.u(name), "latin-1 name\n")
    assert do_commit(tree).ok
    assert tree.r(name).read_text() == "latin-1 name\n"


# -- selection and exclusion ------------------------------------------------------


def test_per_path_commit_leaves_the_rest_pending(tree: Tree) -> None:
    write(tree.u("new/deep/a"), "a\n")
    write(tree.u("new/deep/b"), "b\n")
    write(tree.u("other"), "o\n")
    result = do_commit(tree, "new/deep/a")
    assert tree.r("new/deep/a").read_text() == "a\n"
    assert not tree.r("new/deep/b").exists() and not tree.r("other").exists()
    assert set(result.applied) == {tree.r("new"), tree.r("new/deep"), tree.r("new/deep/a")}
    pending = {c.path for c in read_changes(tree.layers, tree.real)}
    assert pending == {tree.r("new/deep/b"), tree.r("other")}


def test_per_path_inside_unselected_opaque_dir_keeps_the_view(tree: Tree) -> None:
    write(tree.r("o/hidden"), "real\n")
    opaque_dir(tree.u("o"))
    write(tree.u("o/x"), "x\n")
    write(tree.u("o/y"), "y\n")
    before = view(tree.upper, tree.real)
    do_commit(tree, "o/x")
    assert tree.r("o/x").read_text() == "x\n" and tree.r("o/hidden").exists()
    assert view(tree.upper, tree.real) == before


def test_exclude_patterns_stay_pending(tree: Tree, tmp_path: Path) -> None:
    write(tree.u("app.log"), "log\n")
    write(tree.u("src/deep/x.log"), "log\n")
    write(tree.u("secret/key"), "k\n")
    write(tree.u("build/out/bin"), "b\n")
    write(tree.u("keep.py"), "k\n")
    result = do_commit(tree, exclude=["*.log", "secret/**", f"{tree.real}/build"])
    assert tree.r("keep.py").exists() and tree.r("src/deep").is_dir()
    for rel in ("app.log", "src/deep/x.log", "secret/key", "build/out/bin"):
        assert not tree.r(rel).exists()
    assert tree.r("secret/key") in result.skipped
    pending = {c.path for c in read_changes(tree.layers, tree.real)}
    assert tree.r("secret/key") in pending and tree.r("app.log") in pending


def test_excluded_hidden_entry_keeps_opaque_dir_pending(tree: Tree) -> None:
    write(tree.r("o/keep.lock"), "real\n")
    write(tree.r("o/gone"), "real\n")
    opaque_dir(tree.u("o"))
    write(tree.u("o/new"), "n\n")
    result = do_commit(tree, exclude=["*.lock"])
    assert tree.r("o/keep.lock") in result.skipped
    assert tree.r("o/keep.lock").exists() and not tree.r("o/gone").exists()
    assert any(c.path == tree.r("o") for c in read_changes(tree.layers, tree.real))


# -- conflicts --------------------------------------------------------------------


def test_real_modified_after_copy_up_is_a_conflict(tree: Tree) -> None:
    write(tree.r("f"), "old\n")
    copy_up(tree, "f").write_text("sandbox\n")
    write(tree.u("g"), "other\n")
    time.sleep(0.02)
    tree.r("f").write_text("user edit\n")
    result = do_commit(tree)
    assert [c.path for c in result.conflicts] == [tree.r("f")]
    assert tree.r("f").read_text() == "user edit\n" and tree.r("g").exists()
    assert [c.path for c in read_changes(tree.layers, tree.real)] == [tree.r("f")]
    forced = do_commit(tree, force=True)
    assert forced.ok and tree.r("f").read_text() == "sandbox\n"


def test_added_file_that_now_exists_is_a_conflict(tree: Tree) -> None:
    write(tree.u("n"), "sandbox\n")
    changes = read_changes(tree.layers, tree.real)
    write(tree.r("n"), "user\n")
    plan = make_plan(tree.layers, changes, changes, excluded=lambda _: False, force=False)
    assert [c.path for c in plan.conflicts] == [tree.r("n")]


def test_deleted_file_modified_since_is_a_conflict(tree: Tree) -> None:
    write(tree.r("d/f"), "old\n")
    whiteout(tree.u("d"))
    time.sleep(0.02)
    tree.r("d/f").write_text("user edit\n")
    result = do_commit(tree)
    assert [c.path for c in result.conflicts] == [tree.r("d")]
    assert tree.r("d/f").read_text() == "user edit\n"


def test_same_change_on_both_sides_is_not_a_conflict(tree: Tree) -> None:
    write(tree.r("f"), "old\n")
    copy_up(tree, "f").write_text("same\n")
    time.sleep(0.02)
    tree.r("f").write_text("same\n")
    assert do_commit(tree).ok


# -- symlinks never lead out ------------------------------------------------------


@pytest.fixture
def sentinel(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    write(outside / "passwd", "precious\n")
    return outside


def assert_untouched(sentinel: Path) -> None:
    assert sorted(os.listdir(sentinel)) == ["passwd"]
    assert (sentinel / "passwd").read_text() == "precious\n"


def test_upper_symlink_is_recreated_not_written_through(tree: Tree, sentinel: Path) -> None:
    write(tree.r("a/passwd"), "real\n")
    symlink(tree.u("a"), str(sentinel))
    write(tree.u("b/passwd"), "x\n")
    assert do_commit(tree).ok
    assert os.readlink(tree.r("a")) == str(sentinel)
    assert_untouched(sentinel)


def test_real_parent_symlink_replaced_by_dir(tree: Tree, sentinel: Path) -> None:
    symlink(tree.r("p"), str(sentinel))
    write(tree.u("p/passwd"), "evil\n")
    write(tree.u("p/new"), "evil\n")
    assert do_commit(tree).ok
    assert tree.r("p").is_dir() and not tree.r("p").is_symlink()
    assert_untouched(sentinel)


def test_real_parent_symlink_in_conflict_blocks_children(tree: Tree, sentinel: Path) -> None:
    tree.r("p").mkdir()
    write(tree.u("p/passwd"), "evil\n")
    time.sleep(0.02)
    tree.r("p").rmdir()
    symlink(tree.r("p"), str(sentinel))
    result = do_commit(tree)
    assert tree.r("p/passwd") in [c.path for c in result.conflicts]
    assert_untouched(sentinel)
    forced = do_commit(tree, force=True)
    assert forced.ok and tree.r("p/passwd").read_text() == "evil\n"
    assert_untouched(sentinel)


def test_excluded_symlink_parent_excludes_children(tree: Tree, sentinel: Path) -> None:
    symlink(tree.r("p"), str(sentinel))
    write(tree.u("p/passwd"), "evil\n")
    result = do_commit(tree, exclude=["p"])
    assert set(result.skipped) == {tree.r("p"), tree.r("p/passwd")}
    assert_untouched(sentinel)


def test_symlink_swapped_in_after_planning_is_refused(tree: Tree, sentinel: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    write(tree.r("d/f"), "old\n")
    copy_up(tree, "d/f").write_text("new\n")
    import manager.commit.apply as apply_mod
    from manager.commit.plan import make_plan as real_plan

    def plan_then_swap(*args, **kwargs):  # type: ignore[no-untyped-def]
        plan = real_plan(*args, **kwargs)
        shutil.rmtree(tree.r("d"))
        symlink(tree.r("d"), str(sentinel))
        return plan

    monkeypatch.setattr(apply_mod, "make_plan", plan_then_swap)
    result = do_commit(tree)
    assert [e.path for e in result.errors] == [tree.r("d/f")]
    assert_untouched(sentinel)


def test_upper_symlink_component_is_refused(tree: Tree, sentinel: Path) -> None:
    symlink(tree.u("a"), str(sentinel))
    with DirChain(tree.upper) as chain, pytest.raises(UnsafePath):
        chain.fd(("a",))


def test_absolute_symlink_target_in_sandbox_is_committed_verbatim(tree: Tree) -> None:
    symlink(tree.u("link"), "/etc/passwd")
    do_commit(tree)
    assert os.readlink(tree.r("link")) == "/etc/passwd"


# -- discard ----------------------------------------------------------------------


def build_mixed(tree: Tree) -> dict[str, object]:
    write(tree.r("keep/f"), "old\n")
    copy_up(tree, "keep/f").write_text("new\n")
    write(tree.u("added/x"), "x\n")
    write(tree.r("gone"), "g\n")
    whiteout(tree.u("gone"))
    return snapshot(tree.real)  # type: ignore[return-value]


def test_discard_all(tree: Tree) -> None:
    before = build_mixed(tree)
    dropped = discard(tree.session, tree.layers, tree.real)
    assert len(dropped) == 4
    assert list(tree.upper.iterdir()) == []
    assert snapshot(tree.real) == before


def test_discard_some_removes_pure_copy_up_parents_only(tree: Tree) -> None:
    build_mixed(tree)
    write(tree.u("added/y"), "y\n")
    discard(tree.session, tree.layers, tree.real, [tree.r("keep/f"), tree.r("added/x")])
    assert not tree.u("keep").exists()          # a pure copy-up, now empty
    assert tree.u("added").is_dir()             # itself a change (added dir) with y pending
    pending = {c.path for c in read_changes(tree.layers, tree.real)}
    assert pending == {tree.r("added"), tree.r("added/y"), tree.r("gone")}


def test_discard_dir_drops_subtree(tree: Tree) -> None:
    build_mixed(tree)
    discard(tree.session, tree.layers, tree.real, [tree.r("added")])
    assert not tree.u("added").exists()


def test_discard_refuses_during_interrupted_commit(tree: Tree) -> None:
    journal.write(tree.session, journal.Journal("t", tree.layers, [], False))
    with pytest.raises(WorkspaceError):
        discard(tree.session, tree.layers, tree.real)


def test_progress_counts_the_bytes_moved_into_place(tree: Tree) -> None:
    write(tree.u("a"), "x" * 100)
    write(tree.u("d/b"), "y" * 50)
    reports: list[tuple[int, int, int]] = []
    assert do_commit(tree, progress=lambda *r: reports.append(r)).ok
    assert reports[-1] == (3, 3, 150)


def test_read_only_files_in_a_read_only_new_tree(tree: Tree) -> None:
    """npm's cache: read-only files in read-only directories, all made in the sandbox; an
    ordinary user can neither rename nor unlink out of a read-only upper directory."""
    write(tree.u("cache/ab/cd"), "data\n")
    write(tree.r("keep"), "old\n")
    copy_up(tree, "keep").write_text("new\n")
    for path, bits in (("cache/ab/cd", 0o444), ("keep", 0o444), ("cache/ab", 0o555),
                       ("cache", 0o555)):
        tree.u(path).chmod(bits)
    result = do_commit(tree)
    assert result.ok and not result.errors, result
    assert tree.r("cache/ab/cd").read_text() == "data\n" and tree.r("keep").read_text() == "new\n"
    assert [mode(tree.r(p)) for p in ("cache/ab/cd", "keep", "cache/ab", "cache")] == \
        [0o444, 0o444, 0o555, 0o555]
    assert read_changes(tree.layers, tree.real) == []
    for path in ("cache/ab", "cache"):
        tree.r(path).chmod(0o755)   # for pytest's clean-up
