"""Attack pass 22 (critical: an unreviewed commit of a directory's mode): ``commit -p`` applies
the mode of a directory above a hidden path, which review never shows.

Attack pass 20's rule is "never shown, never applied" for a directory above a hidden path
whose only change is its mode or owner (``model.holds_a_mask``). ``workspace commit`` drops
such changes (``commit/session.py`` filters ``holds_a_mask`` before planning), but ``commit
-p`` calls ``apply.commit`` directly, which reads the changes itself and filters nothing of
the kind: it plans ``select(all_changes, choices.whole)``, everything at or below each path
chosen whole. Its ``vet`` asks ``reviewable``, which drops the masked directory, so the vet
cannot see it either.

The attack (overlay engine, root): the project's ``.workspace.yaml`` (the agent's Write tool
may write it) has ``hide: ["a/b/secret.txt"]``. A call sets a user xattr on ``a`` (shown:
an xattr change of ``a``, harmless) and runs ``chmod 2777 a/b`` (never shown: ``a/b`` is
above the hidden path). ``workspace commit -p`` asks about ``a``; the user answers y, and
the real ``a/b`` becomes 2777 (world-writable, setgid). Any directory the agent can put a
hidden path below, and any shown change of an ancestor (an xattr, a new file's directory
chosen whole) carries it.

Promise broken: what commit applies is exactly what review showed.

Rule that would close the class: one rule for what is a change, asked of every path that
plans a commit: ``apply.commit`` itself (not only ``commit_session``) drops what review
never shows (``holds_a_mask``, what ``reviewable`` drops), so no caller can forget it.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from tests.conftest import Runner
from tests.review.pty_driver import converse

pytestmark = pytest.mark.usefixtures("overlay_engine")


def test_commit_p_never_applies_a_directory_mode_review_hides(
        project: Path, ws: Runner, sandboxed: Runner) -> None:
    (project / "a/b").mkdir(parents=True)
    (project / "a/b/secret.txt").write_text("s\n")
    (project / "a/b").chmod(0o755)
    (project / ".workspace.yaml").write_text('hide: ["a/b/secret.txt"]\n')
    sandboxed("python3 -c \"import os; os.setxattr('a', 'user.note', b'shown')\" "
              "&& chmod 2777 a/b")
    status = ws("status", check=True).stdout
    diff = ws("diff", check=True).stdout
    assert "a/b" not in status and "a/b" not in diff, (status, diff)   # never shown
    code, screen = converse([sys.executable, "-m", "manager", "commit", "-p"], project,
                            ["y"] * 5)
    mode = stat.S_IMODE(os.lstat(project / "a/b").st_mode)
    assert mode == 0o755, (
        f"commit -p made the real a/b mode {mode:o}, a change review never showed "
        f"(status: {status!r}); commit -p said: {screen!r} (exit {code})")
