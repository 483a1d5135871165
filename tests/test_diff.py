"""Diff output for text, binary, symlink, mode, deleted and added changes."""

from __future__ import annotations

import shutil

from manager.changes.diff import render
from manager.changes.model import read_changes
from tests.overlay_model import Tree
from tests.overlay_model import symlink
from tests.overlay_model import whiteout
from tests.overlay_model import write


def diff(tree: Tree, **kw: object) -> str:
    return render(read_changes(tree.layers, tree.real), tree.real, **kw)  # type: ignore[arg-type]


def test_text_modification(tree: Tree) -> None:
    write(tree.r("src/a.py"), "one\ntwo\nthree\n")
    write(tree.u("src/a.py"), "one\n2\nthree\n")
    out = diff(tree)
    assert "diff --git a/src/a.py b/src/a.py\n--- a/src/a.py\n+++ b/src/a.py\n" in out
    assert "-two\n+2\n" in out and " one\n" in out


def test_added_and_deleted_files(tree: Tree) -> None:
    write(tree.u("new.txt"), "hello\n")
    write(tree.r("old.txt"), "bye\n")
    whiteout(tree.u("old.txt"))
    out = diff(tree)
    assert "new file mode 100644\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hello\n" in out
    assert "deleted file mode 100644\n--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n" in out


def test_binary_summarised(tree: Tree) -> None:
    write(tree.r("img.bin"), b"\0\1\2")
    write(tree.u("img.bin"), b"\0\1\2\3\4")
    assert "Binary files differ (3 bytes -> 5 bytes)" in diff(tree)


def test_symlink_as_target(tree: Tree) -> None:
    symlink(tree.r("link"), "old/target")
    symlink(tree.u("link"), "new/target")
    out = diff(tree)
    assert "--- /dev/null" not in out
    assert "--> old/target\n+-> new/target\n" in out


def test_mode_change_like_git(tree: Tree) -> None:
    write(tree.r("run.sh"), "x\n", mode=0o644)
    tree.u("run.sh").parent.mkdir(exist_ok=True)
    shutil.copy2(tree.r("run.sh"), tree.u("run.sh"))
    tree.u("run.sh").chmod(0o755)
    out = diff(tree)
    assert out == "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n"


def test_large_file_capped(tree: Tree) -> None:
    write(tree.r("big"), "x\n" * 10)
    write(tree.u("big"), "y\n" * 10)
    assert "Large files differ (20 bytes -> 20 bytes)" in diff(tree, max_bytes=10)
    out = diff(tree, max_lines=5)
    assert "more diff lines not shown" in out


def test_outside_project_uses_absolute_path(tree: Tree) -> None:
    write(tree.u("etc/hosts"), "127.0.0.1 x\n")
    changes = read_changes(tree.layers, tree.real / "project")
    out = render(changes, tree.real / "project")
    assert f"+++ {tree.real}/etc/hosts\n" in out


def test_directory_summaries_and_type_change(tree: Tree) -> None:
    write(tree.r("gone/a"), "a\n")
    whiteout(tree.u("gone"))
    write(tree.r("x"), "file\n")
    write(tree.u("x/inner"), "now a dir\n")
    out = diff(tree)
    assert "Directory a/gone deleted with everything in it" in out
    assert "deleted file mode 100644\n--- a/x\n+++ /dev/null\n" in out
    assert "new directory mode 040755" in out


def test_colour_only_when_asked(tree: Tree) -> None:
    write(tree.u("n"), "x\n")
    assert "\033[" not in diff(tree)
    assert "\033[32m+x\033[0m" in diff(tree, color=True)
