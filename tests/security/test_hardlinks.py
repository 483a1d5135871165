"""Issue 11 item 1: a hard link must not outlive review.

Commit used to rename the upper file into place; another hard link to the same
inode left in the upper dir (in workspace's state directory, which status never
shows; in $HOME; at a path not committed) then pointed at the real file, and
the next sandboxed write through it changed the real file with nothing pending.
Every case: commit, write MALICIOUS through the other name in the sandbox, and
the real file must still say what was reviewed, sharing no inode with any
sandbox.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.security import commit_support
from tests.security.commit_support import assert_unshared
from tests.security.commit_support import changes

pytestmark = pytest.mark.engine
commit_engine = commit_support.commit_engine

EVIL = "echo MALICIOUS > "


def _held(path: Path) -> str:
    return path.read_text()


def test_link_to_a_path_not_committed(ws, project: Path, commit_engine: str):
    ws("run", "--", "sh", "-c", "echo benign > build.sh; ln build.sh other", check=True)
    ws("commit", "build.sh", check=True)
    assert_unshared(project / "build.sh")
    ws("run", "--", "sh", "-c", EVIL + "other", check=True)
    assert _held(project / "build.sh") == "benign\n"
    assert str(project / "other") in changes(ws)  # still pending, as reviewed


def test_links_among_committed_files(ws, project: Path, commit_engine: str):
    ws("run", "--", "sh", "-c", "mkdir d; echo benign > a; ln a b; ln a d/c", check=True)
    ws("commit", check=True)
    for rel in ("a", "b", "d/c"):
        assert _held(project / rel) == "benign\n"
    assert_unshared(project / "a", project / "b", project / "d/c")
    ws("run", "--", "sh", "-c", EVIL + "a", check=True)
    assert [_held(project / r) for r in ("a", "b", "d/c")] == ["benign\n"] * 3


def test_link_to_a_real_file(ws, project: Path, commit_engine: str):
    """``ln README.txt copy``: the copy-up and the new name share an upper inode (kept in
    the upper dir by the pending change beside it)."""
    ws("run", "--", "sh", "-c", "ln README.txt copy; echo later > pending", check=True)
    ws("commit", "copy", check=True)
    assert_unshared(project / "copy")
    ws("run", "--", "sh", "-c", "echo MALICIOUS >> README.txt", check=True)
    assert _held(project / "copy") == "hello\n"


def test_link_made_after_the_commit(ws, project: Path, commit_engine: str):
    ws("run", "--", "sh", "-c", "echo benign > build.sh", check=True)
    ws("commit", check=True)
    ws("run", "--", "sh", "-c", "ln build.sh late; " + EVIL + "late", check=True)
    assert _held(project / "build.sh") == "benign\n"
    assert_unshared(project / "build.sh")


def test_link_to_the_state_directory(ws, project: Path, overlay_engine: str):
    """The issue's reproduction: workspace's state dir is never shown and never committed."""
    hidden = "$XDG_STATE_HOME/workspace/.x/h"
    made = ws("run", "--", "sh", "-c", "echo benign > build.sh; mkdir -p $XDG_STATE_HOME/workspace/.x; "
                                       f"ln build.sh {hidden}")
    assert "Read-only file system" in made.stderr, made   # hidden (manager/hide.py): no place to link
    ws("commit", check=True)
    assert_unshared(project / "build.sh")
    ws("run", "--", "sh", "-c", EVIL + hidden)
    assert _held(project / "build.sh") == "benign\n"
    assert changes(ws) == {}


def test_link_to_home(ws, project: Path, isolated_state: Path, overlay_engine: str):
    ws("run", "--", "sh", "-c", "echo benign > f; ln f $HOME/g", check=True)
    ws("commit", "f", check=True)
    assert_unshared(project / "f")
    ws("run", "--", "sh", "-c", EVIL + "$HOME/g", check=True)
    assert _held(project / "f") == "benign\n"
    assert not (isolated_state / "g").exists()
    assert str(isolated_state / "g") in changes(ws)


def test_even_a_file_with_one_link_is_a_fresh_inode(ws, project: Path, commit_engine: str):
    """A file with one link is copied too, never renamed into place: an overlay of the
    sandbox still alive elsewhere (a descriptor a command handed out) reaches the upper
    inode wherever it goes (attack passes 16 and 18)."""
    ws("run", "--", "sh", "-c", "echo plain > solo", check=True)
    changes(ws)  # a volume-mode engine brings its upper dir to the host here
    before = [st.st_ino for st in _named_in_sandboxes("solo")]
    assert before
    ws("commit", check=True)
    st = os.lstat(project / "solo")
    assert (st.st_nlink, _held(project / "solo")) == (1, "plain\n")
    assert st.st_ino not in before


def _named_in_sandboxes(name: str) -> list[os.stat_result]:
    from manager.session import store

    sessions, _ = store.list_sessions()
    return [os.lstat(os.path.join(top, name)) for s in sessions
            for top, _dirs, files in os.walk(s.sandbox) if name in files]
