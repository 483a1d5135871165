"""Issue 20 (the stated gap left by test_deleted_after_replace.py): a real file deleted
outside before any walk saw the sandbox's own entry over it came back on commit as "added".

No ``workspace status``, no hook: the sandbox replaces files (a rename over them, a delete
and recreate, a directory replaced by a file), the user deletes or moves the real ones away,
and commits. The overlay engine's holder sees each deletion in the real project as it
happens and records the names over which the sandbox held its own entry
(holder/gone.py): every one is a conflict and stays deleted. A name the sandbox deleted
too, and a file only the sandbox made, commit as before.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.conftest import Runner
from tests.security.commit_support import commit_json

pytestmark = pytest.mark.engine

REPLACED = ["a.txt", "b.txt", "c.txt", "d", "f.txt"]


def _holder_saw(names: list[str], timeout: float = 10.0) -> None:
    """The holder records a deletion within milliseconds: wait for it, not for a walk."""
    state = Path(os.environ["XDG_STATE_HOME"])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        data = b"".join(p.read_bytes() for p in state.glob("workspace/sessions/*/sandbox/deleted.real"))
        if all(f"/{name}\0".encode() in data for name in names):
            return
        time.sleep(0.02)
    raise AssertionError(f"the holder recorded no deletion of {names}")


@pytest.mark.usefixtures("overlay_engine")
def test_deleted_outside_before_any_walk_stays_deleted(ws: Runner, project: Path) -> None:
    for name in ("a.txt", "b.txt", "c.txt", "e.txt", "f.txt"):
        (project / name).write_text(f"base {name}\n")
    (project / "d").mkdir()
    (project / "d" / "x").write_text("in d\n")
    ws("run", "--", "sh", "-ec", "sed -i s/base/sandbox/ a.txt; rm b.txt; echo sandbox > b.txt; "
       "echo sandbox >> c.txt; rm -r d; echo sandbox > d; rm e.txt; sed -i s/base/sandbox/ f.txt; "
       "echo made > new.txt", check=True)
    for name in ("a.txt", "b.txt", "c.txt", "e.txt"):
        (project / name).unlink()
    (project / "d" / "x").unlink()
    (project / "d").rmdir()
    (project / "f.txt").rename(project / "g.txt")   # moved away: gone from its name too
    _holder_saw(REPLACED)
    code, result = commit_json(ws)
    assert sorted(Path(c["path"]).name for c in result["conflicts"]) == REPLACED, result
    assert [n for n in (*REPLACED, "e.txt") if os.path.lexists(project / n)] == []
    assert (project / "new.txt").read_text() == "made\n" and code == 1
    forced, _ = commit_json(ws, "--force")   # the override still brings them back
    assert forced == 0 and (project / "a.txt").read_text() == "sandbox a.txt\n"
    assert (project / "d").read_text() == "sandbox\n"
