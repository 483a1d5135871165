"""A committed session leaves what the same work done natively leaves.

Each script of the corpus runs natively in one copy of a repository and in the sandbox of
an identical copy (same path, one after the other), then ``workspace commit``; the two
results must be equal in every aspect of :mod:`tests.differential.snapshot`, and fsck clean.
The overlay engine runs the whole corpus; the other engines the first cases (their
sandbox holds the project only, not the remote beside it, and each call costs more).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Runner
from tests.differential.corpus import BASE
from tests.differential.corpus import CASES
from tests.differential.corpus import PRELUDE
from tests.differential.snapshot import ASPECTS
from tests.differential.snapshot import snapshot
from tests.engines.conftest import using_engine

pytestmark = pytest.mark.engine

ENGINE_SUBSET = list(CASES)[:2]
OTHER_ENGINES = ["try-main", "podman", "docker"]
# (case, engine or "*") -> {aspect: why the sandbox cannot leave what native work leaves}.
# The case still runs; only the named aspects are not compared.
DIFFERENCES: dict[tuple[str, str], dict[str, str]] = {
    ("hardlinks", "*"): {"links": "a hard-linked upper entry is committed as a copy: renamed, "
                                  "its other names (never reviewed) would go on writing to the "
                                  "real file; so each name is its own file after the commit"},
    ("staged", "*"): {"status": "the index is never copied (git's internal file; see tests/review "
                                "test_index_only_changes_are_not_copied): it is rebuilt from "
                                "HEAD, so what was only staged arrives unstaged"},
}
PARAMS = [("overlay", case) for case in CASES] + \
         [(engine, case) for engine in OTHER_ENGINES for case in ENGINE_SUBSET]


@pytest.fixture
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from using_engine(request, monkeypatch)


def _bash(script: str, cwd: Path, when: int) -> None:
    proc = subprocess.run(["bash", "-c", PRELUDE.format(when=when) + script], cwd=cwd,
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"native script failed:\n{proc.stdout}\n{proc.stderr}"


def _differences(case: str, engine: str) -> dict[str, str]:
    return {**DIFFERENCES.get((case, "*"), {}), **DIFFERENCES.get((case, engine), {})}


@pytest.mark.parametrize(("engine", "case"), PARAMS, indirect=["engine"],
                         ids=[f"{e}-{c}" for e, c in PARAMS])
def test_commit_leaves_what_native_work_leaves(engine: str, case: str, tmp_path: Path,
                                               ws: Runner) -> None:
    when = int(time.time()) - 60
    base, work = tmp_path / "base", tmp_path / "work"
    base.mkdir()
    _bash(BASE, base, when)
    shutil.copytree(base, work, symlinks=True)
    _bash(CASES[case], work / "proj", when)
    native = snapshot(work / "proj")
    _writable(work)
    shutil.rmtree(work)
    shutil.copytree(base, work, symlinks=True)
    proj = work / "proj"
    ws("run", "--", "bash", "-c", PRELUDE.format(when=when) + CASES[case], cwd=proj, check=True)
    committed = ws("commit", cwd=proj)
    assert committed.returncode == 0, committed.stdout + committed.stderr
    sandboxed = snapshot(proj)
    pending = ws("status", cwd=proj, check=True).stdout
    skip = _differences(case, engine)
    assert native["fsck"].startswith("exit 0"), native["fsck"]
    for aspect in ASPECTS:
        if aspect not in skip:
            assert sandboxed[aspect] == native[aspect], \
                f"{aspect} differs after {case} on {engine}\n{committed.stdout}{committed.stderr}"
    if "pending" not in skip:
        assert "nothing pending" in pending, pending


def _writable(root: Path) -> None:
    """The corpus makes read-only trees; an ordinary user must make them writable to delete."""
    for dirpath, _, _ in os.walk(root):
        os.chmod(dirpath, 0o755)
