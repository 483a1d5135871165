"""Attack pass 23: when the agent's commits go to a side branch and one of their files lies in
a new directory, ``commit_session`` settles the trees a second time (``history.kept``) and
plans again; the entries of the reopened tree are fingerprinted by that second plan, after
the vet. A write between the vet and that plan is in the fingerprint, so it is copied.

The attack (a live writer, as pass 22's test_vet_then_plan_window.py: the container engines'
overlays are not probed; here the writer is modelled in-process, writing just after
``shown.late`` returns, as that test writes just after its vet): the agent makes
``newdir/a.txt`` and ``newdir/b.txt`` and commits ``a.txt``; the user commits on the real
branch meanwhile, so the agent's commit is diverted to a side branch and ``a.txt`` stays on
it (``history.kept``). Review shows ``newdir/b.txt`` = ``b``. ``workspace commit``: the first
settle keeps ``newdir`` whole, the vet sees ``b.txt`` as reviewed (``apply.vetted``:
fingerprints of the *whole* tree only, its census sum), then ``trees.holding(whole,
history.kept)`` reopens ``newdir`` and ``planned()`` takes ``b.txt``'s fingerprint
(``ctx.fingerprints`` has none for it) from the upper as it is now: the write is judged
and copied.

Promise broken: what commit applies is exactly what review showed (pass 22's rule,
fingerprint before the vet, does not hold on the history path's second plan).

Rule that would close the class: every fingerprint a plan uses is taken before the vet
(``apply.vetted`` fingerprints each entry of each tree too, or the second settle may only
reuse fingerprints taken before the vet, never take new ones); equivalently, a plan made
after the vet is vetted again.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Runner
from tests.conftest import git

pytestmark = pytest.mark.usefixtures("overlay_engine")

WRITER = """
import sys
from manager.session import shown
from manager.main import main

vetted = shown.late


def late(seen, applying):
    out = vetted(seen, applying)
    for change in applying:   # the live writer, just after the vet read the entry
        if change.real_path.endswith("/newdir/b.txt"):
            with open(change.upper_path, "w") as f:
                f.write("unreviewed\\n")
    return out


shown.late = late
raise SystemExit(main(["commit"]))
"""


@pytest.mark.parametrize("diverted", [True, False], ids=["side-branch", "control"])
def test_a_write_after_the_vet_in_a_reopened_tree_is_not_committed(
        repo: Path, ws: Runner, sandboxed: Runner, diverted: bool) -> None:
    """``control``: the branch not moved, the tree goes whole and its census sum refuses
    the write (it holds); ``side-branch``: the tree is reopened and the write committed."""
    sandboxed("mkdir newdir && echo a > newdir/a.txt && echo b > newdir/b.txt && "
              "git add newdir/a.txt && git commit -qm 'Agent: a'")
    if diverted:
        (repo / "b.py").write_text("x = 'user'\n")
        git(repo, "commit", "-qam", "User: b")
    shown = ws("diff", "--no-pager", check=True).stdout
    assert "b.txt" in shown and "unreviewed" not in shown, shown
    ws("status", check=True)
    proc = subprocess.run([sys.executable, "-c", WRITER], cwd=repo, capture_output=True,
                          text=True, timeout=120)
    b = repo / "newdir/b.txt"
    assert not b.exists() or b.read_text() == "b\n", (
        f"commit applied newdir/b.txt as written after its vet: {b.read_text()!r}; commit "
        f"said {proc.stdout!r} {proc.stderr!r}")
