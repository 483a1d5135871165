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

import subprocess
import sys
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


def test_discard_path_then_commit_commits_the_rest(project: Path, ws, sandboxed) -> None:
    """What discard dropped left the record too (``shown.forget_gone``)."""
    sandboxed("echo a > a.txt; echo b > b.txt")
    ws("status", check=True)
    ws("discard", "--yes", str(project / "a.txt"), check=True)
    done = ws("commit")
    assert done.returncode == 0, done
    assert (project / "b.txt").exists() and not (project / "a.txt").exists()


# `workspace commit`, killed as it starts copying b.txt: its journal written, a.txt done.
KILLED_AT_B = """
import os, signal
from manager.commit import steps
real = steps._copy_entry
def copy(up_fd, up_name, *rest):
    if up_name == "b.txt":
        os.kill(os.getpid(), signal.SIGKILL)
    return real(up_fd, up_name, *rest)
steps._copy_entry = copy
from manager.main import main
raise SystemExit(main(["commit"]))
"""


def test_an_interrupted_commit_finished_is_no_change_after_review(project: Path, ws,
                                                                  sandboxed) -> None:
    """The entries a resumed commit finishes leave the upper by its hand: the review still
    current, the rest commits (before: refused, naming them as changed after review)."""
    sandboxed("echo a > a.txt; echo b > b.txt; mkdir n; echo c > n/c.txt")
    ws("status", check=True)
    killed = subprocess.run([sys.executable, "-c", KILLED_AT_B], cwd=project,
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed
    done = ws("commit")
    assert done.returncode == 0, done.stderr
    assert "finished an interrupted commit" in done.stdout, done
    assert all((project / p).exists() for p in ("a.txt", "b.txt", "n/c.txt"))
