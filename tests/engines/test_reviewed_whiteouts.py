"""Deletions reviewed are committed: overlayfs links every whiteout of a mount to one inode
(cached in its work dir), whose ctime moves when the engine clears the work dir at release;
commit's check for writes made after review must not read that as a late deletion (issue 21:
the differential corpus failed so on rootless podman)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engines.support import status

pytestmark = [pytest.mark.engine, pytest.mark.as_user,
              pytest.mark.parametrize("engine_name", ["docker", "podman"], indirect=True)]


def test_reviewed_deletions_commit_after_release(ws, project: Path, engine_name: str):
    for name in ("a.txt", "b.txt"):
        (project / name).write_text(name)
    ws("run", "--", "rm", "a.txt", "b.txt", check=True)
    assert status(ws) == {str(project / "a.txt"): "deleted", str(project / "b.txt"): "deleted"}
    ws("commit", check=True)
    assert not (project / "a.txt").exists() and not (project / "b.txt").exists()
    assert (project / "README.txt").exists()
