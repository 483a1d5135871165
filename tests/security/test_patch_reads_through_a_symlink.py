"""Attack pass 8: the host readers of an upper follow a symlink in any component but the last.

``fs/regular.open_regular`` reaches the path with ``O_PATH|O_NOFOLLOW``, which refuses a
symlink only as the *last* component; every directory above is followed. The walk of the
changes lists ``upper/.../d/f.txt``; a call running meanwhile (``commit -p`` asks without the
lock, the container engines keep processes, a call may run during ``diff``) replaces the
directory ``d`` with a symlink to a host directory, and the reader (here ``commit -p``'s
question: ``patch_prompt.text_plan`` -> ``read_regular(change.upper)``) opens the host's own
file there: a file outside the sandbox (a hidden one too: hide binds nothing on the host) is
shown as the sandbox's version, and the hunks the user takes are written into the real
project, where the agent reads them. Rule broken: a host reader of an upper never follows a
symlink out of it (Read's copy, ``readcopy._open_below``, opens every component O_NOFOLLOW).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import Runner
from tests.conftest import git
from tests.review.pty_driver import converse

pytestmark = pytest.mark.usefixtures("overlay_engine")


def test_a_question_does_not_read_through_a_swapped_directory(
        repo: Path, ws: Runner, sandboxed: Runner, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    lines = [f"line {i}\n" for i in range(1, 31)]
    host = list(lines)
    host[1], host[24] = "HOST-ONLY-CONTENT\n", "other\n"   # two hunks: one taken, a part written
    (outside / "f.txt").write_text("".join(host))
    (repo / "d").mkdir()
    (repo / "d/f.txt").write_text("".join(lines))
    git(repo, "add", "d/f.txt")
    git(repo, "commit", "-qm", "d")
    sandboxed("echo b > a.txt && sed -i s/^line.5$/five/ d/f.txt")     # a.txt is asked first

    before = (outside / "f.txt").stat().st_ino

    def swap_then_yes() -> str:      # the agent, before d/f.txt's turn
        ws("run", "--", "sh", "-c", f"rm -rf d && ln -s {outside} d", check=True)
        return "y"

    code, screen = converse([sys.executable, "-m", "manager", "commit", "-p"], repo,
                            [swap_then_yes, "y", "n"])
    wrote = {"shown": "HOST-ONLY-CONTENT" in screen,
             "into the real project": "HOST-ONLY-CONTENT" in (repo / "d/f.txt").read_text(),
             "the host file replaced (renew_upper through the symlink)":
                 (outside / "f.txt").stat().st_ino != before,
             "xattrs set on the host file": os.listxattr(outside / "f.txt"),
             "files left in the host directory": sorted(p.name for p in outside.iterdir())}
    assert not any(list(wrote.values())[:4]) and wrote["files left in the host directory"] == ["f.txt"], \
        (wrote, screen)
