"""A snapshotted level that vanishes while the holder refreshes it (a container's layer
under /var/lib/docker, removed by the engine at any moment) is left to its parent's
refresh; it must not retire the holder (every call would then start a new one)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from manager.engines.overlay.holder import levels as overlay_levels

REPO = Path(__file__).resolve().parents[2]


class _VanishingLevel:
    """The holder's builder at the moment the level goes: the engine unmounts and removes
    it as the refresh asks for its upper directory (the real race falls between the
    refresh's checks and that step)."""

    real_prefix = ""
    host_ns = own_ns = -1
    hidden: frozenset[str] = frozenset()

    def __init__(self, tmp: Path) -> None:
        self.skeleton = tmp / "skeleton"
        self.mounts: list[str] = []
        self.log: list[str] = []

    def at(self, base: Path, point: str) -> Path:
        return base / point.lstrip("/")

    def skeleton_entry(self, real: str, copy: Path) -> str:
        copy.write_text("")
        return "file"

    def make_upper(self, point: str) -> Path:
        overlay_levels.detach(point)
        shutil.rmtree(point)
        os.stat(point)   # as the holder's make_upper reads the real level: gone
        raise AssertionError("unreachable")

    def work_dir(self, point: str) -> Path:
        raise AssertionError("not asked for a level that is gone")

    def has_mounts_below(self, path: str) -> bool:
        return False


def race(tmp: str) -> None:
    """In a private mount namespace: the level is a mount (as every snapshotted level is
    in the holder's), then refreshed while it goes."""
    level = Path(tmp) / "var/lib/docker/overlay2/abc"
    level.mkdir(parents=True)
    (level / "x").write_text("x")
    subprocess.run(["mount", "--bind", str(level), str(level)], check=True)
    builder = _VanishingLevel(Path(tmp))
    builder.at(builder.skeleton, str(level)).mkdir(parents=True)
    overlay_levels.refresh(builder, str(level), {"x"})
    assert not level.exists()
    print("refreshed")


def test_a_level_gone_during_its_refresh_is_left_to_its_parent(tmp_path: Path):
    code = f"from tests.engines.test_overlay_levels import race; race({str(tmp_path)!r})"
    proc = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", sys.executable,
                           "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (0, "refreshed\n"), proc.stderr
