"""Diff output for text, binary, symlink, mode, deleted and added changes."""

from __future__ import annotations

import difflib
import random
import shutil
from pathlib import Path

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


def test_lines_added_or_cut_at_the_end_diff_exactly_as_difflib(tree: Tree) -> None:
    """The shortcut for a side that only grew (or was cut) at its end writes what
    difflib's matcher would, repeated lines and hunk ranges included."""
    rng = random.Random(12)
    cases = [("one\n", "one\ntwo\n"), ("a\nb\na\nb\n", "a\nb\na\nb\na\nb\n"), ("x\n" * 9, "x\n" * 4)]
    for _ in range(300):
        base = [rng.choice("ab") for _ in range(rng.randint(1, 12))]
        more = base + [rng.choice("abc") for _ in range(rng.randint(1, 5))]
        pair = (more, base) if rng.random() < 0.5 else (base, more)
        cases.append(tuple("".join(f"{line}\n" for line in side) for side in pair))
    for i, (old, new) in enumerate(cases):
        write(tree.r(f"f{i}.txt"), old)
        write(tree.u(f"f{i}.txt"), new)
    out = diff(tree) + "diff --git"      # each file's lines end where the next begins
    for i, (old, new) in enumerate(cases):
        label = f"f{i}.txt"
        expected = difflib.unified_diff(old.splitlines(), new.splitlines(),
                                        f"a/{label}", f"b/{label}", lineterm="")
        block = "".join(f"{line}\n" for line in expected)
        assert f"diff --git a/{label} b/{label}\n{block}diff --git" in out, (old, new)


def test_a_file_is_read_whole_whatever_size_lstat_said(tmp_path: Path) -> None:
    from manager.changes.diff import _read_nofollow

    data = bytes(range(256)) * 1000          # 256,000 bytes
    path = tmp_path / "f"
    path.write_bytes(data)
    for hint in (0, 1, 255, 65_535, len(data) - 1, len(data), len(data) + 10):
        assert _read_nofollow(str(path), hint, len(data)) == data
    # Past the limit (a file a call keeps growing): read no further, and say so.
    assert _read_nofollow(str(path), 0, len(data) - 1) is None
    path.write_bytes(b"")
    assert _read_nofollow(str(path), 0, 10) == b""
