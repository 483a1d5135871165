"""Issue 20: what commit applies is what review showed, with the sandbox's processes
still running.

The container engines keep a call's background processes (by design); one that wrote
after ``workspace diff`` changed what ``workspace commit`` applied, unseen. Commit stops
the sandbox before it reads anything (nothing runs during the commit) and refuses, with
nothing applied, while a path changed after the last call ended and after the last
review; a second review shows it, and the commit then goes through. In volume mode the
times say nothing (the upper comes out of the volume at commit): there the review's
record of each file's digest and of every entry's name is compared (session/shown.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engines.conftest import engine_cli
from tests.security.after_review import container_engine  # noqa: F401 - the fixture
from tests.security.after_review import release

pytestmark = pytest.mark.engine

# Left running by the call: waits for the test's signal (given in the container from
# outside any call), then writes, as a dev server or a watcher would.
LATER = ("(i=0; while [ ! -e /dev/shm/go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; "
         "echo late > out/late.txt; echo changed >> out/a.txt; touch /dev/shm/wrote) "
         ">/dev/null 2>&1 </dev/null &")



def test_a_write_after_review_by_a_background_process_is_not_committed(
        ws, project: Path, container_engine: str):  # noqa: F811
    (project / "out").mkdir()
    ws("run", "--", "sh", "-c", "echo a > out/a.txt; " + LATER, check=True)
    shown = ws("diff", "--no-pager", check=True).stdout
    assert "out/a.txt" in shown and "late.txt" not in shown
    release(engine_cli(container_engine), "/dev/shm/wrote")
    proc = ws("commit")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "late.txt" in proc.stderr and "review again" in proc.stderr
    assert not (project / "out" / "a.txt").exists(), "commit applied part of it"
    assert not (project / "out" / "late.txt").exists()

    assert "late.txt" in ws("diff", "--no-pager", check=True).stdout   # seen now
    ws("commit", check=True)
    assert (project / "out" / "late.txt").read_text() == "late\n"
    assert (project / "out" / "a.txt").read_text() == "a\nchanged\n"


def test_writes_of_calls_after_a_review_commit_as_before(ws, project: Path,
                                                         container_engine: str):  # noqa: F811
    """Only writes no call made are held: a call run after the review commits as before."""
    ws("run", "--", "sh", "-c", "echo a > a.txt", check=True)
    ws("status", check=True)
    ws("run", "--", "sh", "-c", "echo b > b.txt", check=True)
    ws("commit", check=True)
    assert (project / "b.txt").read_text() == "b\n"
