"""A committed session leaves what the same work done natively leaves.

The whole corpus (:mod:`tests.differential.corpus`) runs once natively in a copy of a
repository, then, for each engine, in one sandbox session over an identical copy at the
same path, committed once; the two results must be equal in every aspect of
:mod:`tests.differential.snapshot`, and fsck clean. The native side is shared by the
engines (module scope); each engine costs one session, one call and one commit.

What an engine cannot leave as native work does is listed in DIFFERENCES (and in
docs/fidelity.md): the case still runs, and only the named aspect of its own directory is
not compared.
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
from tests.differential.corpus import FLAGGED
from tests.differential.corpus import PRELUDE
from tests.differential.corpus import TREE
from tests.differential.corpus import base
from tests.differential.corpus import script
from tests.differential.snapshot import ASPECTS
from tests.differential.snapshot import snapshot
from tests.engines.conftest import using_engine

pytestmark = pytest.mark.engine

ENGINES = ["overlay", "try-main", "podman", "docker"]
CONTAINERS = ("podman", "docker")
# (TREE case, engine or "*") -> {aspect: why the sandbox cannot leave what native work
# leaves}; "runs" names a case the engine cannot run at all.
DIFFERENCES: dict[tuple[str, str], dict[str, str]] = {
    ("hardlinks", "*"): {"links": "a hard-linked upper entry is committed as a copy: renamed, "
                                  "its other names (never reviewed) would go on writing to the "
                                  "real file; so each name is its own file after the commit"},
    ("staged", "*"): {"status": "the index is never copied (git's internal file; see tests/review "
                                "test_index_only_changes_are_not_copied): it is rebuilt from "
                                "HEAD, so what was only staged arrives unstaged"},
}
SANDBOX_IMAGE = "the sandbox image has no {what} (workspace-sandbox: Debian's git, make, python3)"
for _engine in CONTAINERS:
    for _case, _what in (("npm_offline", "npm"), ("pip_editable", "setuptools")):
        DIFFERENCES[(_case, _engine)] = dict.fromkeys(("runs", "tree", "status"),
                                                      SANDBOX_IMAGE.format(what=_what))
DIFFERENCES[("chown", "try-main")] = dict.fromkeys(
    ("runs", "tree", "status"),
    "try maps only the caller's id into its namespace: chown to another id fails")
PER_CASE = ("tree", "links", "status", "runs")


class Native:
    """The corpus done natively, once: where, when, its snapshot."""

    def __init__(self, base_dir: Path, work: Path, when: int) -> None:
        self.base, self.work, self.when = base_dir, work, when
        self.proj = work / "proj"
        # Built where every run happens: the remotes' URLs are absolute paths into it.
        work.mkdir()
        _bash(base(), work, when)
        shutil.copytree(work, base_dir, symlinks=True)
        out = _bash(script(), self.proj, when)
        assert "FAILED" not in out, f"a case failed natively:\n{out}"
        self.snapshot = snapshot(self.proj)
        assert self.snapshot["fsck"].startswith("exit 0"), self.snapshot["fsck"]


@pytest.fixture(scope="module")
def native(tmp_path_factory: pytest.TempPathFactory) -> Native:
    root = tmp_path_factory.mktemp("differential")
    return Native(root / "base", root / "work", int(time.time()) - 60)


@pytest.fixture
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from using_engine(request, monkeypatch)


def _bash(body: str, cwd: Path, when: int) -> str:
    prelude = PRELUDE.format(when=when, root=int(os.geteuid() == 0))
    home = cwd.parent / "home"      # npm and pip write below $HOME: never the real one
    home.mkdir(exist_ok=True)
    proc = subprocess.run(["bash", "-c", prelude + body], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "HOME": str(home)})
    assert proc.returncode == 0, f"native script failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_commit_leaves_what_native_work_leaves(engine: str, native: Native, ws: Runner) -> None:
    _fresh_copy(native.base, native.work)
    prelude = PRELUDE.format(when=native.when, root=int(os.geteuid() == 0))
    took: dict[str, float] = {}

    def timed(step: str, *args: str) -> subprocess.CompletedProcess[str]:
        start = time.monotonic()
        proc = ws(*args, cwd=native.proj, timeout=600)
        took[step] = time.monotonic() - start
        assert proc.returncode == 0, f"{step}: {proc.stdout}{proc.stderr}"
        return proc

    ran = timed("run", "run", "--", "bash", "-c", prelude + script())
    committed = timed("commit", "commit")
    timed("commit flagged", "commit", *FLAGGED)
    pending = timed("status", "status").stdout
    print(f"differential {engine}: " + ", ".join(f"{k} {v:.1f} s" for k, v in took.items()))
    problems = _compare(native.snapshot, snapshot(native.proj), engine, ran.stdout)
    assert not problems, "\n".join([*problems, committed.stdout, committed.stderr])
    assert "nothing pending" in pending, pending


def _compare(native: dict[str, object], sandboxed: dict[str, object], engine: str,
             ran: str) -> list[str]:
    problems = []
    for case in TREE:
        failed = f"FAILED {case}" in ran.split("\n")
        if failed and "runs" not in _differences(case, engine):
            problems.append(f"{case} failed in the sandbox on {engine}")
    for aspect in ASPECTS:
        mine, theirs = (_without(aspect, snap[aspect], engine) for snap in (native, sandboxed))
        if mine != theirs:
            problems.append(f"{aspect} differs on {engine}:\n{_diff(mine, theirs)}")
    return problems


def _differences(case: str, engine: str) -> dict[str, str]:
    return {**DIFFERENCES.get((case, "*"), {}), **DIFFERENCES.get((case, engine), {})}


def _without(aspect: str, value: object, engine: str) -> object:
    """The aspect less what the documented differences of the TREE cases leave out."""
    if aspect not in PER_CASE:
        return value
    skipped = tuple(f"t/{case}/" for case in TREE if aspect in _differences(case, engine))
    if aspect == "tree":
        assert isinstance(value, dict)
        return {k: v for k, v in value.items() if not (k + "/").startswith(skipped)}
    if aspect == "links":
        assert isinstance(value, list)
        return [names for names in value if not names[0].startswith(skipped)]
    assert isinstance(value, str)
    return "\n".join(line for line in value.split("\n")
                     if not line[3:].strip('"').startswith(skipped))


def _diff(native: object, sandboxed: object) -> str:
    """The first differing entries, native first."""
    if isinstance(native, dict) and isinstance(sandboxed, dict):
        keys = sorted(k for k in native.keys() | sandboxed.keys()
                      if native.get(k) != sandboxed.get(k))
        return "\n".join(f"  {k}: {native.get(k)!r} != {sandboxed.get(k)!r}" for k in keys[:30])
    if isinstance(native, str) and isinstance(sandboxed, str):
        mine, theirs = native.split("\n"), sandboxed.split("\n")
        return "\n".join([*(f"  native only:    {line}" for line in mine if line not in theirs),
                          *(f"  sandboxed only: {line}" for line in theirs if line not in mine)])
    return f"  native:    {native!r}\n  sandboxed: {sandboxed!r}"[:3000]


def _fresh_copy(base_dir: Path, work: Path) -> None:
    if work.exists():
        _writable(work)
        shutil.rmtree(work)
    shutil.copytree(base_dir, work, symlinks=True)


def _writable(root: Path) -> None:
    """The corpus makes read-only trees; an ordinary user must make them writable to delete."""
    for dirpath, _, _ in os.walk(root):
        os.chmod(dirpath, 0o755)
