"""attack4: the holder's refresh misses a ``hide`` pattern that names the project through a
symlink, and shows a secret that appeared after the start.

When the real project changes, the overlay holder now refreshes the project's mount instead
of starting a fresh holder, unless a ``hide`` pattern names a path that appeared since
(holder/project.py ``new_hidden``: "only a fresh sandbox mounts a new mask"). It compares the
patterns as written (``hide.patterns``: absolute, ``~`` expanded, symlinks not resolved) with
the mount point, a real path: a pattern that reaches the project through a symlink outside
that mount (``hide: [/var/tmp/LINK/proj/.env]``, LINK -> the project's parent; or ``~/...``
where ``$HOME`` holds a symlink) is never "within" it, so the file that appears is shown.
A fresh holder hides it (hide.targets resolves the pattern): the refresh alone shows it.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from manager.engines.overlay import engine as overlay
from manager.session import store

pytestmark = [pytest.mark.engine, pytest.mark.as_user]


@pytest.fixture(autouse=True)
def _on_overlay(overlay_engine: str) -> None:
    """The built-in overlay engine (the root conftest's fixture)."""


def test_a_secret_named_through_a_symlink_is_not_shown_by_a_refresh(ws, project: Path,
                                                                     tmp_path: Path):
    link = Path("/var/tmp") / f"ws-attack4-{uuid.uuid4().hex[:8]}"   # outside the project's mount
    link.symlink_to(project.parent)
    try:
        config = tmp_path / "config/workspace/config.yaml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(f"engine: overlay\nhide: [{link / project.name / '.env'}]\n")
        ws("run", "--", "true", check=True)
        session = store.current(project)
        assert session is not None
        pid = overlay.holder_pid(session.sandbox)
        (project / ".env").write_text("TOKEN=hunter2\n")     # saved after the start
        proc = ws("run", "--", "sh", "-c", "cat .env; true", check=True)
        same = overlay.holder_pid(session.sandbox) == pid
        assert "hunter2" not in proc.stdout + proc.stderr, f"shown (same holder: {same})"
    finally:
        os.unlink(link)
