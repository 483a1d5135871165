"""Issue 11 item 8 (commit part): a commit killed while it tidies up.

Once every path is in place a commit removes the used upper entries, then the
upper directories left empty, then its journal. Killed in there, the journal
survives; the next commit finishes it. It used to print one error per file
("committed, but its sandbox copy could not be removed") and exit 1 although
every file was right. Now it finishes quietly and exits 0.

The kill is real (SIGKILL to the committing process, through the CLI, against
the real engine); only its moment is chosen: the Nth removal in the cleanup.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from manager.changes.model import read_changes
from manager.commit.apply import commit
from tests.overlay_model import Tree
from tests.overlay_model import whiteout
from tests.overlay_model import write
from tests.security import commit_support
from tests.security.commit_support import changes

pytestmark = pytest.mark.engine
commit_engine = commit_support.commit_engine

# Commit (through the CLI, or apply.commit on a hand-made tree), dying at the Nth removal
# of the cleanup: removing used upper entries (steps), tidying the upper dirs (apply), and
# inside that tidying's removal of whole trees (longpath.remove_entry: one call per entry).
KILLER = """
import os, signal, sys
from pathlib import Path
from manager.fs import longpath
from manager.commit import apply, safefs, steps
after = int(sys.argv[1])
calls = []
def dying(real):
    def remove_at(fd, name, **more):
        calls.append(name)
        if len(calls) > after:
            os.kill(os.getpid(), signal.SIGKILL)
        real(fd, name, **more)
    return remove_at
longpath.remove_entry = dying(longpath.remove_entry)
safefs.remove_at = dying(safefs.remove_at)
apply.remove_at = dying(apply.remove_at)
steps.remove_at = dying(steps.remove_at)
if len(sys.argv) == 2:
    from manager.main import main
    raise SystemExit(main(["commit"]))
from manager.changes.model import Layer
session, upper, real = map(Path, sys.argv[2:5])
apply.commit(session, [Layer(upper, real)], real)
"""


def _kill_commit(cwd: Path, after: int, *tree: Path) -> int:
    proc = subprocess.run([sys.executable, "-c", KILLER, str(after), *map(str, tree)],
                          cwd=cwd, capture_output=True, text=True, timeout=120)
    return proc.returncode


def _sandbox_work(project: Path) -> str:
    for i in range(6):
        (project / f"gone{i}").write_text("old\n")
        (project / f"d{i}").mkdir()
        (project / f"d{i}/f").write_text("old\n")
    return ("for i in 0 1 2 3 4 5; do echo new > d$i/f; mkdir -p n$i/sub; echo a > n$i/sub/a; "
            "rm gone$i; done")


@pytest.mark.parametrize("after", [2, 6, 8, 12])
def test_rerun_after_a_kill_in_the_cleanup(ws, project: Path, commit_engine: str, after: int):
    ws("run", "--", "sh", "-c", _sandbox_work(project), check=True)
    assert _kill_commit(project, after) == -9
    rerun = ws("commit")
    assert (rerun.returncode, rerun.stderr) == (0, ""), rerun
    assert "finished an interrupted commit" in rerun.stdout
    assert rerun.stdout.count("\n") <= 2, rerun.stdout  # a summary, not a line per file
    for i in range(6):
        assert (project / f"d{i}/f").read_text() == "new\n"
        assert (project / f"n{i}/sub/a").read_text() == "a\n"
        assert not (project / f"gone{i}").exists()
    assert changes(ws) == {}
    again = ws("commit")
    assert (again.returncode, again.stderr) == (0, "")


@pytest.mark.parametrize("after", [0, 3, 7, 9])
def test_resumed_cleanup_reports_no_errors(tree: Tree, after: int):
    """The same on a hand-made upper dir whose changes sit in several top directories."""
    for i in range(5):  # the real files first, as in life: the sandbox deletes what was there
        write(tree.r(f"d{i}/f"), "old\n")
        write(tree.r(f"gone{i}"), "old\n")
    for i in range(5):
        write(tree.u(f"d{i}/f"), "new\n")
        write(tree.u(f"d{i}/added"), "a\n")
        whiteout(tree.u(f"gone{i}"))
    assert _kill_commit(tree.root, after, tree.session, tree.upper, tree.real) == -9
    result = commit(tree.session, tree.layers, tree.real)
    assert (result.errors, result.conflicts, result.applied) == ([], [], [])
    assert len(result.resumed) == 15
    assert read_changes(tree.layers, tree.real) == []
    assert [tree.r(f"d{i}/f").read_text() for i in range(5)] == ["new\n"] * 5
    assert not (tree.session / "commit-journal.json").exists()
