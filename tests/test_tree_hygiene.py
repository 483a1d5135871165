"""The committed tree holds no unresolved merge: a conflict marker in any tracked text file
(docs included, where nothing else would notice) fails the suite."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# git's markers: seven of <, = or > at the start of a line (a bare ======= is a conflict's
# middle only between the other two, so it alone does not count: reST underlines use it).
OPENING = re.compile(rb"^<{7}(?: |$)", re.M)
CLOSING = re.compile(rb"^>{7}(?: |$)", re.M)


def _tracked_files() -> list[Path]:
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True,
                         check=True).stdout
    return [ROOT / name.decode() for name in out.split(b"\0") if name]


def markers_in(data: bytes) -> list[int]:
    """Line numbers (1-based) of conflict markers in ``data``."""
    return [data.count(b"\n", 0, m.start()) + 1
            for pattern in (OPENING, CLOSING) for m in pattern.finditer(data)]


def test_markers_are_found() -> None:
    assert markers_in(b"a\n<<<<<<< HEAD\nb\n=======\nc\n>>>>>>> main\n") == [2, 6]
    assert markers_in(b"Title\n=======\n") == []


def test_no_conflict_markers_in_the_tree() -> None:
    found = []
    for path in _tracked_files():
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue   # binary
        found += [f"{path.relative_to(ROOT)}:{line}" for line in markers_in(data)]
    assert not found, f"unresolved merge conflict markers: {found}"
