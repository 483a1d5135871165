"""Issue 20 finding 1: a real edit made after the sandbox took its view of a path is
never lost, whatever the sandbox then did to the path.

The conflict check compared the real file's ctime with the birth of the upper
entry; a sandbox that replaced its copy (``sed -i``, an editor's atomic save,
delete and recreate) gave the upper entry a new birth, later than the real
edit, and the commit overwrote the edit without a word.

Each trial is one path: a first sandbox operation (the sandbox's view is taken),
maybe a second one, and one real edit between the two or after both. Committing
must keep every real edit or report the path as a conflict.
"""

from __future__ import annotations

import os
import random
import shlex
import stat
from pathlib import Path

import pytest

from tests.security import commit_support
from tests.security.commit_support import commit_json

pytestmark = pytest.mark.engine
commit_engine = commit_support.commit_engine

TRIALS = 200
SEED = 20

SANDBOX_OPS = {
    "write": "echo sandbox >> {f}",
    "rename": "sed -i s/base/sandbox/ {f}",          # a new file renamed over it
    "recreate": "rm {f} && echo sandbox > {f}",
    "chmod": "chmod 751 {f}",
    "truncate": "truncate -s 2 {f}",
}
REPLACING = {"rename", "recreate"}  # the upper entry is no copy of the real file any more


def _edit(path: Path, how: str) -> None:
    if how == "content":
        with open(path, "ab") as f:
            f.write(b"user\n")
    elif how == "mode":
        os.chmod(path, 0o600)
    elif how == "delete":
        path.unlink()
    else:  # replace: an editor's atomic save
        temp = path.with_name(path.name + ".swp")
        temp.write_bytes(b"user's own\n")
        os.replace(temp, path)


def _state(path: Path) -> tuple[bytes, int] | None:
    try:
        return path.read_bytes(), stat.S_IMODE(os.lstat(path).st_mode)
    except FileNotFoundError:
        return None


def _trials() -> list[tuple[str, str | None, str, str]]:
    """(first op, second op or None, real edit, when: "between" the ops or "after")."""
    rng = random.Random(SEED)
    found = []
    while len(found) < TRIALS:
        first = rng.choice(list(SANDBOX_OPS))
        second = rng.choice([None, *SANDBOX_OPS])
        edit = rng.choice(["content", "mode", "delete", "replace"])
        when = rng.choice(["between", "after"])
        ops = {first} if second is None or when == "between" else {first, second}
        # No review here, and a real file deleted after the sandbox replaced its copy leaves
        # no trace of its own: the evidence is a walk's record, tried (with reviews) by
        # test_deleted_after_replace.py; without any walk, docs/security.md's known gap.
        if edit == "delete" and (ops | {second}) & REPLACING:
            continue
        found.append((first, second, edit, when))
    return found


def _sandbox(ws, script: list[str]) -> None:  # type: ignore[no-untyped-def]
    if script:
        ws("run", "--", "sh", "-ec", "; ".join(script), check=True)


def test_a_real_edit_after_the_sandbox_touched_a_path_is_never_lost(ws, project: Path,
                                                                   commit_engine: str):
    trials = _trials()
    for i in range(len(trials)):
        (project / f"t{i}").write_bytes(f"base {i}\n".encode())
        os.chmod(project / f"t{i}", 0o644)
    ws("run", "--", "true", check=True)
    _sandbox(ws, [SANDBOX_OPS[first].format(f=f"t{i}") for i, (first, *_) in enumerate(trials)])
    expected = {}

    def edit_now(when: str) -> None:
        for i, (_first, _second, edit, at) in enumerate(trials):
            if at == when:
                _edit(project / f"t{i}", edit)
                expected[i] = _state(project / f"t{i}")

    edit_now("between")
    _sandbox(ws, [SANDBOX_OPS[second].format(f=shlex.quote(f"t{i}"))
                  for i, (_f, second, _e, _w) in enumerate(trials) if second])
    edit_now("after")

    _code, result = commit_json(ws)
    conflicted = {c["path"] for c in result["conflicts"]}
    lost = [trials[i] for i, state in expected.items()
            if str(project / f"t{i}") not in conflicted and _state(project / f"t{i}") != state]
    print(f"{commit_engine}: {len(lost)} of {len(trials)} real edits lost, "
          f"{len(conflicted)} conflicts reported")
    assert lost == []


def test_rename_over_after_a_real_edit_is_a_conflict(ws, project: Path, commit_engine: str):
    """The issue's own steps: append, real edit, ``sed -i``."""
    (project / "a.txt").write_text("base\n")
    ws("run", "--", "sh", "-c", "echo agent1 >> a.txt", check=True)
    with open(project / "a.txt", "a") as f:
        f.write("user\n")
    ws("run", "--", "sed", "-i", "s/agent1/agent2/", "a.txt", check=True)
    code, result = commit_json(ws)
    assert (project / "a.txt").read_text() == "base\nuser\n"
    assert [c["path"] for c in result["conflicts"]] == [str(project / "a.txt")]
    assert code == 1


def test_a_real_edit_below_a_directory_the_sandbox_replaced_is_a_conflict(
        ws, project: Path, commit_engine: str):
    """The sandbox's copy of d/f goes with its directory; the real d/f, edited after the
    copy-up, must not be pruned as an entry the new directory merely hides."""
    (project / "d").mkdir()
    (project / "d" / "f").write_text("base\n")
    ws("run", "--", "sh", "-c", "echo sandbox >> d/f", check=True)
    with open(project / "d" / "f", "a") as f:
        f.write("user\n")
    ws("run", "--", "sh", "-c", "rm -rf d && mkdir d && echo new > d/g", check=True)
    code, result = commit_json(ws)
    assert (project / "d" / "f").read_text() == "base\nuser\n"
    assert str(project / "d" / "f") in {c["path"] for c in result["conflicts"]}
    assert code == 1


def test_a_copy_up_moved_or_linked_in_the_sandbox_is_no_conflict(ws, project: Path,
                                                                  commit_engine: str):
    """The other side of the deletion rule: a copy-up under a new name has no real file
    there, and nobody deleted one."""
    for name in ("a", "b"):
        (project / name).write_text(f"{name}\n")
    ws("run", "--", "sh", "-c", "echo more >> a && mv a moved && ln b linked", check=True)
    code, result = commit_json(ws)
    assert (code, result["conflicts"]) == (0, [])
    assert (project / "moved").read_text() == "a\nmore\n" and not (project / "a").exists()
    assert (project / "linked").read_text() == "b\n"
