"""``workspace commit -p`` through a real terminal: some hunks of several files."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import Runner
from tests.conftest import git
from tests.review.pty_driver import converse

pytestmark = pytest.mark.usefixtures("overlay_engine")   # the real CLI on the overlay engine

LINES = [f"line {i}\n" for i in range(1, 31)]


def test_chosen_hunks_are_committed_and_the_rest_stays_pending(
        repo: Path, ws: Runner, sandboxed: Runner) -> None:
    (repo / "long.txt").write_text("".join(LINES))
    git(repo, "add", "long.txt")
    git(repo, "commit", "-qm", "long")
    sandboxed("sed -i 's/^line 2$/line TWO/; s/^line 25$/line TWENTY-FIVE/' long.txt "
              "&& echo 'x = 2' > b.py && echo new > c.txt")
    sandbox_view = ws("run", "--", "cat", "long.txt", check=True).stdout
    # In path order: b.py no; c.txt (a new file) yes; long.txt first hunk yes, second no.
    code, screen = converse([sys.executable, "-m", "manager", "commit", "-p"], repo,
                            ["n", "y", "y", "n"])
    assert code == 0, screen
    assert "@@ -1,5 +1,5 @@" in screen and "+line TWO" in screen
    real = (repo / "long.txt").read_text()
    assert "line TWO\n" in real and "line 25\n" in real and "TWENTY-FIVE" not in real
    assert (repo / "b.py").read_text() == "x = 1\n"
    assert (repo / "c.txt").read_text() == "new\n"
    status = ws("status", "--short", check=True).stdout.splitlines()
    assert status == ["M  b.py", "M  long.txt"]
    diff = ws("diff", "long.txt", check=True).stdout
    assert "+line TWENTY-FIVE" in diff and "TWO" not in diff
    assert ws("run", "--", "cat", "long.txt", check=True).stdout == sandbox_view
    ws("commit", check=True)        # the rest, with no conflict from our own partial write
    assert "TWENTY-FIVE" in (repo / "long.txt").read_text()
    assert "nothing pending" in ws("status", check=True).stdout


def test_split_and_quit(repo: Path, ws: Runner, sandboxed: Runner) -> None:
    sandboxed("printf 'ONE\\ntwo\\nTHREE\\n' > a.py")
    code, screen = converse([sys.executable, "-m", "manager", "commit", "-p"], repo,
                            ["s", "n", "y", "q"])
    assert code == 0, screen
    assert "Split into 2 hunks." in screen
    assert (repo / "a.py").read_text() == "one\ntwo\nTHREE\n"
    assert ws("run", "--", "cat", "a.py", check=True).stdout == "ONE\ntwo\nTHREE\n"


def test_a_file_chosen_whole_is_not_applied_if_it_changed_while_you_chose(
        repo: Path, ws: Runner, sandboxed: Runner) -> None:
    # Issue 20: what commit applies is what review showed. The questions are asked without
    # the session's lock: a call (or, on the container engines, a process one left,
    # through a mapping that moves no time) may rewrite an offered file meanwhile.
    sandboxed("echo shown > c.txt")

    def rewrite_then_yes() -> str:
        ws("run", "--", "sh", "-c", "echo EVIL > c.txt", check=True)
        return "y"

    code, screen = converse([sys.executable, "-m", "manager", "commit", "-p"], repo,
                            [rewrite_then_yes])
    assert "Commit added file c.txt" in screen, screen
    assert code != 0 and "changed" in screen and "c.txt" in screen, screen
    assert not (repo / "c.txt").exists()
    assert ws("run", "--", "cat", "c.txt", check=True).stdout == "EVIL\n"   # still pending


@pytest.mark.parametrize(("before", "after"), [
    ("echo shown > c.txt && chmod 0644 c.txt", "chmod 0755 c.txt"),                # mode
    ("echo shown > c.txt", "rm c.txt && ln -s /etc/hostname c.txt"),               # type
    ("ln -s README.txt c.txt", "ln -sfn /etc/hostname c.txt"),                     # target
], ids=["mode", "file-to-symlink", "symlink-target"])
def test_an_entry_chosen_whole_is_not_applied_if_any_attribute_changed_while_you_chose(
        repo: Path, ws: Runner, sandboxed: Runner, before: str, after: str) -> None:
    # Every attribute commit applies is compared, not only a file's content (attack pass 6).
    sandboxed(before)

    def change_then_yes() -> str:
        ws("run", "--", "sh", "-c", after, check=True)
        return "y"

    code, screen = converse([sys.executable, "-m", "manager", "commit", "-p"], repo,
                            [change_then_yes])
    assert code != 0 and "changed" in screen and "c.txt" in screen, screen
    assert not (repo / "c.txt").exists() and not (repo / "c.txt").is_symlink()


def test_a_directory_whose_xattrs_alone_changed_is_offered_whole(
        repo: Path, ws: Runner, sandboxed: Runner) -> None:
    """Attack pass 21 noticed: an xattr-only directory change made `commit -p` fail (a
    KeyError, exit 3) before it asked anything."""
    (repo / "d").mkdir()
    sandboxed("setfattr -n user.note -v hi d || python3 -c "
              "\"import os; os.setxattr('d', 'user.note', b'hi')\"")
    code, screen = converse([sys.executable, "-m", "manager", "commit", "-p"], repo, ["y"])
    assert code == 0, screen
    assert "extended attributes of directory" in screen, screen
    assert os.getxattr(repo / "d", "user.note") == b"hi"
