"""Attack pass 22 (false refusal): after ``workspace commit PATH``, a plain ``workspace
commit`` (no call in between, so the same review is current) refuses everything, naming the
path just committed as "changed after review".

``shown.changed`` compares every recorded entry with the upper as it is now; the entry
committed by the first commit has left the upper (its change is real: no longer pending),
``shown.entry`` gives "" for it, and that differs from what review read. Nothing is applied,
the review cache is dropped, and the user is told a path changed after review that no one
changed. The same after an interrupted commit is finished by the next ``workspace commit``:
the resumed entries leave the upper, then the vet refuses the rest naming them.

Promise broken: none of the security kind, but a false refusal: a legitimate commit fails
(and the message says the sandbox changed after review when it did not).

Rule that would close the class: what commit (or discard) made no longer pending leaves the
record too (or the check ignores a recorded entry whose change is no longer pending:
gone from the upper *and* real as recorded).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("overlay_engine")


def test_commit_after_commit_path_commits_the_rest(project: Path, ws, sandboxed) -> None:
    sandboxed("echo a > a.txt; echo b > b.txt; mkdir n; echo c > n/c.txt")
    ws("status", check=True)
    one = ws("commit", str(project / "a.txt"))
    assert one.returncode == 0, one
    two = ws("commit")
    assert two.returncode == 0 and (project / "b.txt").exists(), (
        f"the second commit refused: {two.stdout!r} {two.stderr!r}")
