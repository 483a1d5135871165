"""A commit killed (SIGKILL) at random moments, then resumed: every file is old or new, always."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from manager.changes.model import read_changes
from manager.commit.apply import commit
from tests.overlay_model import Tree
from tests.overlay_model import opaque_dir
from tests.overlay_model import snapshot
from tests.overlay_model import view
from tests.overlay_model import whiteout
from tests.overlay_model import write

REPO = Path(__file__).resolve().parents[2]
SCRIPT = """
import sys
from pathlib import Path
from manager.commit.apply import commit
from manager.changes.model import Layer
session, upper, real = map(Path, sys.argv[1:4])
commit(session, [Layer(upper, real)], real)
"""


def old(i: int) -> bytes:
    return f"old {i}\n".encode() * 200


def new(i: int) -> bytes:
    return f"new {i}\n".encode() * 300


def build(tree: Tree) -> dict[str, set[bytes | None]]:
    """The sandbox, and for each file the contents allowed mid-commit (None: absent)."""
    allowed: dict[str, set[bytes | None]] = {}
    for i in range(1200):
        rel = f"d{i % 8}/f{i}"
        write(tree.r(rel), old(i))
        allowed[rel] = {old(i)}
    for i in range(10):
        write(tree.r(f"gone_dir/g{i}"), old(i))
        write(tree.r(f"opq/o{i}"), old(i))
        allowed[f"gone_dir/g{i}"] = {old(i), None}
        allowed[f"opq/o{i}"] = {old(i), None}
    for i in range(1000):
        rel = f"d{i % 8}/f{i}"
        write(tree.u(rel), new(i))
        allowed[rel].add(new(i))
    for i in range(1000, 1100):
        rel = f"d{i % 8}/f{i}"
        whiteout(tree.u(rel))
        allowed[rel].add(None)
    for i in range(60):
        rel = f"added{i % 3}/sub/a{i}"
        write(tree.u(rel), new(i))
        allowed[rel] = {new(i), None}
    whiteout(tree.u("gone_dir"))
    opaque_dir(tree.u("opq"))
    write(tree.u("opq/o1"), new(1))
    allowed["opq/o1"].add(new(1))
    return allowed


def check_old_or_new(tree: Tree, allowed: dict[str, set[bytes | None]]) -> None:
    for rel, choices in allowed.items():
        path = tree.r(rel)
        content = path.read_bytes() if path.exists() else None
        assert content in choices, f"{rel}: {content[:20] if content else content!r}"


def stray_temps(*roots: Path) -> list[str]:
    return [os.path.join(d, n) for root in roots for d, dirs, files in os.walk(root)
            for n in dirs + files if n.startswith(".ws-")]


def run_and_kill(tree: Tree, rng: random.Random, iteration: int) -> bool:
    """Kill a commit subprocess; mostly a random moment after it wrote its journal."""
    journal = tree.session / "commit-journal.json"
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(tree.session), str(tree.upper),
                             str(tree.real)], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    if iteration % 4 == 0:  # anywhere, planning included
        time.sleep(rng.uniform(0.0, 0.2))
    else:
        deadline = time.monotonic() + 10
        while not journal.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(rng.uniform(0.0, 0.05))
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return journal.exists()


def upper_roots(tmp_path: Path, where: str) -> Path:
    if where == "same-fs":
        return tmp_path / "t"
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("no second filesystem (/dev/shm) to put the upper directory on")
    return shm / f"ws-crash-{os.getpid()}"


@pytest.mark.slow
@pytest.mark.parametrize("where", ["same-fs", "other-fs"])
def test_killed_commit_resumes_old_or_new(tmp_path: Path, where: str) -> None:
    tree = Tree.make(tmp_path / "t")
    upper_root = upper_roots(tmp_path, where)
    if where == "other-fs":
        upper_root.mkdir()
        tree.upper = upper_root / "upper"   # made by the first upper entry, as overlayfs does
    try:
        allowed = build(tree)
        expected = view(tree.upper, tree.real)
        rng = random.Random(20240601)
        interrupted = 0
        for iteration in range(20):
            interrupted += run_and_kill(tree, rng, iteration)
            check_old_or_new(tree, allowed)
        result = commit(tree.session, tree.layers, tree.real)
        assert result.ok and not result.conflicts, result
        assert snapshot(tree.real) == expected
        assert read_changes(tree.layers, tree.real) == []
        assert stray_temps(tree.real, tree.upper) == []
        assert not (tree.session / "commit-journal.json").exists()
        print(f"{where}: {interrupted} of 20 kills interrupted a commit")
        assert interrupted >= 3
    finally:
        if where == "other-fs":
            shutil.rmtree(upper_root, ignore_errors=True)
