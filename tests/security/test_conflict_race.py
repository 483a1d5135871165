"""Issue 11 item 6: a real edit made in the same clock tick as the sandbox's copy-up.

The conflict check used to compare the real file's ctime with the upper copy's
birth time strictly; both come from the same coarse clock, so an edit in the
same tick as the copy-up looked older than it and was silently overwritten.

Each trial is cheap: one sandboxed call copies up 200 files one after the other
and, after each copy-up, prints the file's number; the host reads the call's
output as it comes and appends to the real file at once, well within a clock
tick of the copy-up for most trials. Committing must then lose none of the
host's lines: every file is a conflict, left pending.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.security import commit_support
from tests.security.commit_support import commit_json

pytestmark = pytest.mark.engine
commit_engine = commit_support.commit_engine  # the fixture, shared with the other modules

TRIALS = 200


def _edit_as_told(call: subprocess.Popen[bytes], project: Path) -> list[int]:
    """Append to each real file the moment the sandbox says it copied it up."""
    seen = []
    assert call.stdout is not None
    for line in iter(call.stdout.readline, b""):
        index = int(line)
        _edit(project / f"f{index}", f"base\nhost {index}\n".encode(), index)
        seen.append(index)
    return seen


def _edit(path: Path, data: bytes, index: int) -> None:
    """Half the trials edit in place, half save as editors do (a new file renamed over)."""
    if index % 2:
        with open(path, "r+b") as real:
            real.write(data)
        return
    temp = path.with_name(f".{path.name}.swp")
    temp.write_bytes(data)
    os.rename(temp, path)


def test_edit_in_the_copy_up_tick_is_never_lost(ws, project: Path, commit_engine: str):
    for i in range(TRIALS):
        (project / f"f{i}").write_bytes(b"base\n")
    ws("run", "--", "true", check=True)  # the sandbox is up before the clock matters
    script = (f"i=0; while [ $i -lt {TRIALS} ]; do "
              "echo sandbox >> f$i; echo $i; i=$((i+1)); done")
    call = subprocess.Popen([sys.executable, "-m", "manager", "run", "--", "sh", "-c", script],
                            cwd=project, stdout=subprocess.PIPE)
    seen = _edit_as_told(call, project)
    assert call.wait(timeout=120) == 0
    assert seen == list(range(TRIALS))

    code, result = commit_json(ws)
    lost = [i for i in range(TRIALS)
            if (project / f"f{i}").read_bytes() != f"base\nhost {i}\n".encode()]
    conflicted = {c["path"] for c in result["conflicts"]}
    print(f"{commit_engine}: {len(lost)} of {TRIALS} real edits lost, "
          f"{len(conflicted)} conflicts reported")
    assert lost == []
    assert conflicted == {str(project / f"f{i}") for i in range(TRIALS)}
    assert code == 1


def test_an_edit_well_before_the_copy_up_is_no_conflict(ws, project: Path, commit_engine: str):
    """The other side: the check must not cry wolf at ordinary, earlier real edits."""
    for i in range(5):
        (project / f"g{i}").write_bytes(b"real edit\n")
    ws("run", "--", "sh", "-c", "sleep 0.05; for i in 0 1 2 3 4; do echo sandbox >> g$i; done",
       check=True)
    code, result = commit_json(ws)
    assert (code, result["conflicts"]) == (0, [])
    for i in range(5):
        assert (project / f"g{i}").read_bytes() == b"real edit\nsandbox\n"
