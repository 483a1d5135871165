"""Attack pass 11: a real file the sandbox replaced, deleted or moved away outside with the
directory that holds it, comes back on commit as "added", record or not.

holder/gone.py records a name deleted or moved away in the real project when the sandbox holds
its own entry at that name; a directory only when the sandbox's hides the real one (opaque).
``mv d d2`` outside is one IN_MOVED_FROM event, for ``d``; the sandbox's ``d`` is a merged
(not opaque) directory, so nothing is recorded, and no event names ``d/a.txt``, over which the
sandbox held its own file (replaced by a rename, as an editor or ``sed -i`` saves). Commit then
finds no real ``d/a.txt`` and no record, takes the sandbox's file as added, and makes ``d``
again beside the user's ``d2``, without a word. A walk between (status, the guard rails' Stop
walk) records ``d/a.txt`` and commit reports the conflict; the holder's record is meant to
stand in for that walk (docs/security.md, issue 20).

Worse, the record does not help once the real directory is gone: with ``rm -r d`` outside the
holder does record ``d/a.txt`` (an IN_DELETE per file), and with ``workspace status`` between
the walk records it too, yet commit plans ``d`` as a new directory and its entries below it
without asking the record (plan.conflict runs on a real parent only): ``d/a.txt`` is
recreated in all four cases here, though docs/security.md says commit takes such a path
"now without its real entry (or without its real directory)" as a conflict. Rule broken:
commit never loses a real edit made outside meanwhile (promise 4), here the user's move or
deletion.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import Runner
from tests.security.commit_support import commit_json

pytestmark = pytest.mark.engine


@pytest.mark.parametrize("walk", [False, True], ids=["no-walk", "status-between"])
@pytest.mark.parametrize("outside", ["mv", "rm"])
@pytest.mark.usefixtures("overlay_engine")
def test_a_replaced_file_gone_with_its_directory_stays_gone(ws: Runner, project: Path,
                                                             outside: str, walk: bool) -> None:
    (project / "d").mkdir()
    (project / "d" / "a.txt").write_text("base\n")
    (project / "d" / "b.txt").write_text("base\n")
    ws("run", "--", "sh", "-ec", "echo sandbox > d/a.tmp && mv d/a.tmp d/a.txt", check=True)
    if walk:
        ws("status", check=True)
    if outside == "mv":
        (project / "d").rename(project / "d2")    # the user's move, outside
    else:
        shutil.rmtree(project / "d")              # the user's deletion, outside
    time.sleep(1)   # the holder records within milliseconds
    if walk:
        # With the real directory gone, commit would add ``d`` itself, which the review
        # did not read (it showed ``d/a.txt``): it asks for a review first, nothing applied.
        late = ws("commit")
        assert late.returncode == 1 and "changed after review" in late.stderr, late
        assert not (project / "d").exists()
        ws("status", check=True)
    code, result = commit_json(ws)
    # The conflict names the directory gone (what the sandbox had in it waits below it).
    assert [Path(c["path"]).name for c in result["conflicts"]] in (["d"], ["a.txt"]), result
    assert not (project / "d").exists(), "commit made the directory gone outside again"
    assert code == 1
