"""Status says how much room is left where the sandbox's writes land, and warns when it
runs low (issue 20: nothing an agent writes may fill the machine unannounced)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import Runner

# In a user and mount namespace of its own: a real 8 MiB filesystem, 6 MiB of it written.
SMALL_DISK = """
import json, os, subprocess, sys
from pathlib import Path
from manager.review import space
top = Path(sys.argv[1])
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(top)], check=True)
(top / "sandbox").mkdir()
(top / "sandbox" / "fill").write_bytes(b"x" * (6 << 20))
found = space.of(top / "sandbox")
print(json.dumps([found, space.warning(found)]))
"""


def test_a_nearly_full_disk_is_said(tmp_path: Path) -> None:
    (tmp_path / "disk").mkdir()
    proc = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", sys.executable, "-c",
                           SMALL_DISK, str(tmp_path / "disk")], capture_output=True, text=True,
                          cwd=Path(__file__).parents[2])
    assert proc.returncode == 0, proc.stderr
    found, warning = json.loads(proc.stdout)
    assert found["total_bytes"] == 8 << 20 and found["free_bytes"] <= 2 << 20 and found["low"]
    assert "free of 8.0 MiB" in warning and "commit or discard" in warning


def test_status_json_has_the_room_left(repo: Path, ws: Runner, sandboxed: Runner) -> None:
    sandboxed("echo new > fresh.txt")
    disk = json.loads(ws("status", "--json").stdout)["disk"]
    assert disk["total_bytes"] >= disk["free_bytes"] > 0
    assert isinstance(disk["low"], bool)
