"""Issue 20: a real file deleted outside after the sandbox replaced its copy came back on
commit, shown as "added".

The sandbox's own entry (an atomic save renamed over the path, a delete and recreate)
carries no trace of the real file it stood over, so at commit it looked like a file the
sandbox created. The evidence is per name: a review (any walk of the pending changes)
saw the sandbox's entry over a real one; commit finds the real one gone: a conflict,
``--force`` the override. The rule withdrawn before (a conflict whenever the real
directory's names changed) made every file the sandbox created in a directory that an
atomic save touched outside a conflict: that must commit as before.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.claude.conftest import Claude
from tests.engines.conftest import ENGINES
from tests.engines.conftest import using_engine
from tests.security.commit_support import commit_json

pytestmark = pytest.mark.engine

SANDBOX_OPS = {
    "write": "echo sandbox >> {f}",
    "rename": "sed -i s/base/sandbox/ {f}",          # a new file renamed over it
    "recreate": "rm {f} && echo sandbox > {f}",
    "chmod": "chmod 751 {f}",
    "truncate": "truncate -s 2 {f}",
}


@pytest.fixture(params=ENGINES)
def every_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from using_engine(request, monkeypatch)


def _atomic_save(path: Path, text: str) -> None:
    temp = path.with_name(path.name + ".swp")
    temp.write_text(text)
    os.replace(temp, path)


def _kinds(ws) -> dict[str, str]:  # type: ignore[no-untyped-def]
    proc = ws("status", "--json", check=True)
    return {c["path"]: c["kind"] for c in json.loads(proc.stdout)["changes"]}


def test_a_replaced_file_deleted_outside_after_review_is_a_conflict(ws, project: Path,
                                                                    every_engine: str):
    """The issue's steps (a.txt), the withdrawn rule's false conflict (d/made.txt), the
    reverse (c.txt: review saw it added, a real one appears), and a name whose deletion
    was committed before the sandbox made it again (e.txt: no stale evidence)."""
    (project / "a.txt").write_text("old\n")
    (project / "d").mkdir()
    (project / "d" / "keep.txt").write_text("keep\n")
    (project / "e.txt").write_text("e\n")
    ws("run", "--", "sh", "-ec", "echo new > a.tmp && mv a.tmp a.txt; echo made > d/made.txt; "
                                 "echo sandbox > c.txt; sed -i s/e/E/ e.txt", check=True)
    seen = _kinds(ws)
    assert (seen[str(project / "a.txt")], seen[str(project / "d/made.txt")],
            seen[str(project / "c.txt")]) == ("modified", "added", "added")
    ws("run", "--", "rm", "e.txt", check=True)

    (project / "a.txt").unlink()                              # the user deletes it outside
    _atomic_save(project / "d" / "keep.txt", "kept\n")        # d's names change outside
    (project / "c.txt").write_text("user\n")
    code, result = commit_json(ws)
    conflicts = {c["path"]: c["reason"] for c in result["conflicts"]}
    assert set(conflicts) == {str(project / "a.txt"), str(project / "c.txt")}, conflicts
    assert "deleted outside" in conflicts[str(project / "a.txt")]
    assert not (project / "a.txt").exists()
    assert (project / "c.txt").read_text() == "user\n"
    assert (project / "d" / "made.txt").read_text() == "made\n"
    assert not (project / "e.txt").exists() and code == 1

    ws("run", "--", "sh", "-c", "echo again > e.txt", check=True)
    code, result = commit_json(ws, str(project / "e.txt"))
    assert (code, result["conflicts"]) == (0, [])
    assert (project / "e.txt").read_text() == "again\n"

    code, result = commit_json(ws, "--force", str(project / "a.txt"))
    assert (code, result["conflicts"]) == (0, [])
    assert (project / "a.txt").read_text() == "new\n"


def test_no_reviewed_file_deleted_outside_comes_back(ws, project: Path, every_engine: str):
    """The class: every sandbox operation, alone or followed by another, a review after
    each, and the real file deleted between them or after both. None comes back unless
    reported as a conflict."""
    trials = [(first, second, when) for first in SANDBOX_OPS
              for second in (None, *SANDBOX_OPS) for when in ("between", "after")
              if not (second is None and when == "between")]
    for i in range(len(trials)):
        (project / f"t{i}").write_text(f"base {i}\n")

    def sandbox(ops: list[str]) -> None:
        if ops:
            ws("run", "--", "sh", "-ec", "; ".join(ops), check=True)
        ws("status", "--json", check=True)

    def delete(when: str) -> None:
        for i, trial in enumerate(trials):
            if trial[2] == when:
                (project / f"t{i}").unlink()

    sandbox([SANDBOX_OPS[first].format(f=f"t{i}") for i, (first, _s, _w) in enumerate(trials)])
    delete("between")
    sandbox([SANDBOX_OPS[second].format(f=f"t{i}")
             for i, (_f, second, _w) in enumerate(trials) if second])
    delete("after")
    _code, result = commit_json(ws)
    conflicted = {c["path"] for c in result["conflicts"]}
    back = [trials[i] for i in range(len(trials))
            if (project / f"t{i}").exists() and str(project / f"t{i}") not in conflicted]
    print(f"{every_engine}: {len(back)} of {len(trials)} deleted files came back, "
          f"{len(conflicted)} conflicts")
    assert back == []


def test_the_end_of_a_turn_records_the_evidence_without_a_review(ws, repo: Path,
                                                                 claude: Claude):
    """No ``workspace status`` at all: the guard rails' walk at the end of the turn (the
    real hook's Stop, in a git project) saw the sandbox's a.txt over the real one."""
    claude.start()
    assert claude.bash("echo new > a.tmp && mv a.tmp a.txt").returncode == 0
    assert claude.hook("Stop", {"stop_hook_active": False}).returncode == 0
    (repo / "a.txt").unlink()
    code, result = commit_json(ws)
    assert [c["path"] for c in result["conflicts"]] == [str(repo / "a.txt")]
    assert not (repo / "a.txt").exists() and code == 1
