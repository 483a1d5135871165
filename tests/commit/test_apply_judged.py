"""Commit copies only what its plan judged (manager/commit/judged.py).

Each upper entry is changed where nothing should change it: after the plan, before its copy
(a live writer, which the in-use probe otherwise keeps out), during the copy, and between
an interrupted commit and its resume (calls run then). Nothing of a changed entry becomes
real; a fresh commit says so and leaves it pending, a resumed one leaves it to the same
commit's fresh plan, which judges it again (a setuid file made meanwhile is refused).
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from manager.changes.model import read_changes
from manager.commit import apply
from manager.commit import journal
from manager.commit import steps
from manager.commit.judged import CHANGED
from tests.overlay_model import Tree
from tests.overlay_model import write


def _copy_up(tree: Tree, rel: str) -> Path:
    tree.u(rel).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(tree.r(rel), tree.u(rel))
    return tree.u(rel)


def _after_plan(monkeypatch: pytest.MonkeyPatch, change: Callable[[], None]) -> None:
    """Run ``change`` once the plan is journaled, before its first step."""
    real_write = journal.write

    def write_then_change(session_dir: Path, planned: journal.Journal) -> journal.Journal:
        written = real_write(session_dir, planned)
        change()
        return written

    monkeypatch.setattr(journal, "write", write_then_change)


def _interrupted(tree: Tree, monkeypatch: pytest.MonkeyPatch, at: str = "_execute") -> None:
    """A commit killed (Ctrl-C) when it reaches ``apply.<at>``: its journal stays."""
    def die(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(apply, at, die)
    with pytest.raises(KeyboardInterrupt):
        apply.commit(tree.session, tree.layers, tree.real)
    monkeypatch.undo()
    assert journal.read(tree.session) is not None


def _setuid_sh(path: Path) -> None:
    path.unlink()
    shutil.copy("/bin/sh", path)
    path.chmod(0o4755)


def _file(tree: Tree) -> tuple[str, Callable[[], None]]:
    write(tree.r("tool"), "real\n", mode=0o755)
    _copy_up(tree, "tool").write_text("judged\n")
    return "tool", lambda: tree.u("tool").write_text("unjudged\n")


def _file_setuid(tree: Tree) -> tuple[str, Callable[[], None]]:
    write(tree.r("tool"), "real\n", mode=0o755)
    _copy_up(tree, "tool").write_text("judged\n")
    return "tool", lambda: tree.u("tool").chmod(0o4755)


def _symlink(tree: Tree) -> tuple[str, Callable[[], None]]:
    tree.u("").mkdir(exist_ok=True)
    os.symlink("judged", tree.u("link"))

    def retarget() -> None:
        tree.u("link").unlink()
        os.symlink("/etc/shadow", tree.u("link"))
    return "link", retarget


def _dir_mode(tree: Tree) -> tuple[str, Callable[[], None]]:
    tree.r("d").mkdir(mode=0o755)
    tree.u("d").mkdir(mode=0o700)
    return "d", lambda: tree.u("d").chmod(0o2777)


def _dir_xattr(tree: Tree) -> tuple[str, Callable[[], None]]:
    tree.r("d").mkdir(mode=0o755)
    tree.u("d").mkdir(mode=0o700)
    return "d", lambda: os.setxattr(tree.u("d"), "user.note", b"unjudged")


def _tree_file(tree: Tree) -> tuple[str, Callable[[], None]]:
    write(tree.u("new/sub/f"), "judged\n")
    return "new", lambda: tree.u("new/sub/f").write_text("unjudged\n")


def _tree_added(tree: Tree) -> tuple[str, Callable[[], None]]:
    write(tree.u("new/sub/f"), "judged\n")
    return "new", lambda: write(tree.u("new/sub/g"), "unjudged\n")


CASES = {"file": _file, "file-setuid": _file_setuid, "symlink": _symlink,
         "dir-mode": _dir_mode, "dir-xattr": _dir_xattr, "tree-file": _tree_file,
         "tree-added": _tree_added}


def _real(tree: Tree, rel: str) -> object:
    path = tree.r(rel)
    if not os.path.lexists(path):
        return None
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return os.readlink(path)
    if stat.S_ISDIR(st.st_mode):
        return (stat.S_IMODE(st.st_mode), os.listxattr(path),
                sorted(str(p.relative_to(path)) for p in path.rglob("*")),
                [p.read_text() for p in sorted(path.rglob("*")) if p.is_file()])
    return stat.S_IMODE(st.st_mode), path.read_bytes()


@pytest.mark.parametrize("case", CASES)
def test_an_entry_changed_after_the_plan_is_not_committed(
        tree: Tree, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rel, change = CASES[case](tree)
    before = _real(tree, rel)
    _after_plan(monkeypatch, change)
    result = apply.commit(tree.session, tree.layers, tree.real)
    errors = {str(e.path): e.reason for e in result.errors}
    assert errors.get(str(tree.r(rel)), "").startswith(CHANGED.split(";")[0]), result.as_json()
    assert _real(tree, rel) == before
    assert str(tree.r(rel)) in {c.real_path for c in read_changes(tree.layers, tree.real)}


@pytest.mark.parametrize("case", ["file", "file-setuid", "tree-file"])
def test_an_entry_changed_while_it_is_copied_is_not_committed(
        tree: Tree, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rel, change = CASES[case](tree)
    before = _real(tree, rel)
    real_copy = steps.copy_data

    def copy_then_change(src: int, dst: int, size: int) -> None:
        real_copy(src, dst, size)
        change()

    monkeypatch.setattr(steps, "copy_data", copy_then_change)
    result = apply.commit(tree.session, tree.layers, tree.real)
    assert [str(e.path) for e in result.errors] == [str(tree.r(rel))], result.as_json()
    assert "while this commit copied it" in result.errors[0].reason
    assert _real(tree, rel) == before


def test_a_resumed_commit_leaves_a_changed_entry_to_its_fresh_plan(
        tree: Tree, monkeypatch: pytest.MonkeyPatch) -> None:
    """The attack: the commit dies after its journal; a call then makes the file setuid.
    The resume copies nothing of it; the fresh plan refuses it without --allow-special."""
    write(tree.r("tool"), "real\n", mode=0o755)
    _copy_up(tree, "tool").write_text("judged\n")
    write(tree.u("other"), "other\n")

    _interrupted(tree, monkeypatch)
    _setuid_sh(tree.u("tool"))
    result = apply.commit(tree.session, tree.layers, tree.real)
    assert [str(r.path) for r in result.refused] == [str(tree.r("tool"))], result.as_json()
    assert not result.errors and tree.r("tool").read_text() == "real\n"
    assert tree.r("other").read_text() == "other\n"
    assert journal.read(tree.session) is None


def test_a_resumed_commit_finishes_what_did_not_change(
        tree: Tree, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tree.r("tool"), "real\n", mode=0o755)
    _copy_up(tree, "tool").write_text("judged\n")
    write(tree.u("new/f"), "new\n")

    _interrupted(tree, monkeypatch)
    result = apply.commit(tree.session, tree.layers, tree.real)
    assert result.ok and sorted(map(str, result.resumed)) == \
        [str(tree.r("new")), str(tree.r("tool"))], result.as_json()
    assert tree.r("tool").read_text() == "judged\n" and tree.r("new/f").read_text() == "new\n"


def test_a_resumed_step_whose_upper_entry_vanished_is_not_finished(
        tree: Tree, monkeypatch: pytest.MonkeyPatch) -> None:
    """Attack pass 26's lead: the commit dies after its journal; its upper copy of ``tool``
    then goes (a writer with a descriptor of the sandbox). The resume counted the step done
    (upper entry gone), so it left the review record and nothing refused what the rest of
    the commit then applied. Now only a step whose real entry is the copy it made is done."""
    write(tree.r("tool"), "real\n", mode=0o755)
    _copy_up(tree, "tool").write_text("judged\n")
    write(tree.u("other"), "other\n")

    _interrupted(tree, monkeypatch)
    tree.u("tool").unlink()
    result = apply.commit(tree.session, tree.layers, tree.real)
    assert str(tree.r("tool")) not in map(str, result.resumed), result.as_json()
    assert tree.r("tool").read_text() == "real\n" and tree.r("other").read_text() == "other\n"


def test_a_step_done_before_the_interruption_is_finished(
        tree: Tree, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its copy in place and the upper's removed, the commit dies before its journal goes:
    the resume counts it done (the real entry is the copy it made)."""
    write(tree.r("tool"), "real\n", mode=0o755)
    _copy_up(tree, "tool").write_text("judged\n")
    os.utime(tree.u("tool"), ns=(1_000_000_123, 1_000_000_123))

    _interrupted(tree, monkeypatch, at="tidy_upper")
    assert not tree.u("tool").exists()
    result = apply.commit(tree.session, tree.layers, tree.real)
    assert result.ok and list(map(str, result.resumed)) == [str(tree.r("tool"))], result.as_json()
    assert tree.r("tool").read_text() == "judged\n"
