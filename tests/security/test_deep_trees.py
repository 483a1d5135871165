"""Issue 20, finding 2: a directory chain deeper than Python's stack and longer than
PATH_MAX (3,000 one-letter directories: a 6,000-byte path) made in the sandbox.

Status, diff, commit, discard (with and without paths) and the Stop hook all work on
it: walks are loops, and paths that long are reached through directory descriptors.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from manager.fs import longpath
from tests.claude.conftest import Claude

pytestmark = pytest.mark.engine

DEPTH = 3000
# mkdir and chdir one level at a time, as a hostile command would: no call takes the
# whole path.
MAKE_CHAIN = f"""
import os
fd = os.open('.', os.O_RDONLY)
for _ in range({DEPTH}):
    os.mkdir('d', dir_fd=fd)
    below = os.open('d', os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = below
made = os.open('f', os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
os.write(made, b'deep\\n')
"""
CHAIN = "/".join(["d"] * DEPTH)


@pytest.fixture(autouse=True)
def _remove_chains(project: Path, tmp_path: Path):
    """pytest's own clean-up of old tmp dirs recurses: it must find no chain left."""
    yield
    rel = str(project / "d").lstrip("/")
    uppers = tmp_path.glob("state/workspace/sessions/*/sandbox/upperdir")  # not "**": deep
    tops = [project / "d", *(up / rel for up in uppers)]
    for top in tops:
        if top.is_dir() and not top.is_symlink():
            longpath.remove_tree(str(top))


def _make_chain(ws) -> None:
    ws("run", "--", "python3", "-c", MAKE_CHAIN, check=True, timeout=300)


def _pending(ws) -> list[str]:
    return [c["path"] for c in json.loads(ws("status", "--json", check=True,
                                             timeout=300).stdout)["changes"]]


def test_status_diff_and_commit_of_a_deep_chain(ws, project: Path, overlay_engine: str):
    _make_chain(ws)
    assert len(str(project / CHAIN / "f")) > 4096
    status = ws("status", check=True, timeout=300).stdout
    assert "added:     d/ (1 file)" in status
    diff = ws("diff", "--no-pager", check=True, timeout=300).stdout
    assert f"+++ b/{CHAIN}/f" in diff and "+deep" in diff
    assert "1 file changed, 1 insertion(+)" in ws("diff", "--stat", check=True,
                                                  timeout=300).stdout
    assert str(project / CHAIN / "f") in _pending(ws)

    ws("commit", check=True, timeout=300)
    assert _pending(ws) == []
    with longpath.reach(str(project / CHAIN / "f")) as real:
        assert Path(real).read_text() == "deep\n"
    with longpath.reach(str(project / CHAIN)) as real:
        assert os.listdir(real) == ["f"]


@pytest.mark.parametrize("named", [True, False], ids=["with-paths", "all"])
def test_discard_of_a_deep_chain(ws, project: Path, overlay_engine: str, named: bool):
    (project / "keep.txt").write_text("real\n")
    ws("run", "--", "sh", "-c", "echo sandbox > keep.txt", check=True)
    _make_chain(ws)
    ws("discard", "--yes", *(["d"] if named else []), check=True, timeout=300)
    left = _pending(ws)
    assert left == ([str(project / "keep.txt")] if named else [])
    assert not (project / "d").exists()
    # The sandbox no longer holds the chain either: it is gone from the view.
    assert ws("run", "--", "test", "-e", "d").returncode == 1


def test_stop_hook_with_a_deep_chain_pending(claude: Claude, project: Path, tmp_path: Path):
    import subprocess

    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    assert claude.start().returncode == 0
    script = tmp_path / "chain.py"
    script.write_text(MAKE_CHAIN)
    ran = claude.bash(f"python3 {script}")
    assert ran.returncode == 0, ran.stderr
    answer = claude.hook("Stop", {"stop_hook_active": False})
    assert answer.returncode == 0, answer.stderr
    said = json.loads(answer.stdout or "{}")
    assert "failed" not in json.dumps(said) and "skipped" not in json.dumps(said), said
    resumed = json.loads(claude.start("resume").stdout)
    assert "d/" in resumed["hookSpecificOutput"]["additionalContext"]


def test_a_committed_chain_does_not_stop_the_next_sandbox(overlay_engine, ws, project: Path):
    """Committed, the chain is in the real project, which the next holder watches and, at
    its end, hands back: both walk it (os.walk recursed and the holder died)."""
    _make_chain(ws)
    ws("commit", check=True, timeout=300)
    ws("discard", "--yes", check=True)
    ws("run", "--new", "--", "true", check=True, timeout=300)   # a fresh holder, the real chain
    made = ws("run", "--", "sh", "-c", "echo more > more.txt && cat more.txt", check=True)
    assert made.stdout == "more\n"
    assert _pending(ws) == [str(project / "more.txt")]
