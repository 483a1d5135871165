"""``workspace commit`` applies an agent's git history through git: never a half state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Runner
from tests.conftest import git

pytestmark = pytest.mark.usefixtures("overlay_engine")   # the real CLI on the overlay engine


def agrees(repo: Path) -> None:
    """Work tree, index and HEAD agree (nothing staged or modified) and fsck is clean."""
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""
    git(repo, "fsck", "--strict", "--no-dangling")


def test_agent_commit_fast_forwards_an_unmoved_branch(
        repo: Path, ws: Runner, sandboxed: Runner) -> None:
    start = git(repo, "rev-parse", "HEAD")
    sandboxed("echo four >> a.py && git commit -qam 'Agent: four' && echo new > c.py")
    ws("commit", check=True)
    assert git(repo, "log", "-1", "--format=%s") == "Agent: four"
    assert git(repo, "rev-parse", "HEAD~1") == start
    assert (repo / "a.py").read_text().endswith("four\n") and (repo / "c.py").exists()
    agrees(repo)
    assert "nothing pending" in ws("status", check=True).stdout


def test_a_branch_the_user_moved_is_not_overwritten(
        repo: Path, ws: Runner, sandboxed: Runner) -> None:
    sandboxed("echo four >> a.py && git commit -qam 'Agent: four'")
    (repo / "b.py").write_text("x = 'user'\n")
    git(repo, "commit", "-qam", "User: b")
    user_head = git(repo, "rev-parse", "HEAD")
    proc = ws("commit", check=True)
    assert git(repo, "rev-parse", "HEAD") == user_head
    side = [b for b in git(repo, "branch", "--format=%(refname:short)").split()
            if b.startswith("workspace/")]
    assert len(side) == 1 and side[0].endswith("/main")
    assert git(repo, "log", "-1", "--format=%s", side[0]) == "Agent: four"
    assert f"git merge {side[0]}" in proc.stdout
    assert (repo / "a.py").read_text() == "one\ntwo\nthree\n"   # on the branch, not here
    agrees(repo)
    assert "nothing pending" in ws("status", check=True).stdout


def test_branch_tag_and_stash_are_applied(repo: Path, ws: Runner, sandboxed: Runner) -> None:
    git(repo, "branch", "old")
    sandboxed("git branch feature && git tag v1 && git branch -qD old "
              "&& echo s >> b.py && git stash -q")
    out = json.loads(ws("commit", "--json", check=True).stdout)["git"]
    assert out["stashed"] == 1
    assert git(repo, "rev-parse", "feature") == git(repo, "rev-parse", "main")
    assert git(repo, "rev-parse", "v1") == git(repo, "rev-parse", "main")
    assert git(repo, "branch", "--list", "old") == ""
    assert len(git(repo, "stash", "list").splitlines()) == 1
    agrees(repo)


def test_git_config_stays_pending_unless_named(repo: Path, ws: Runner, sandboxed: Runner) -> None:
    sandboxed("git config core.fsmonitor 'touch /tmp/owned' && echo four >> a.py")
    proc = ws("commit", check=True)
    assert "security-relevant, still pending" in proc.stdout
    assert "fsmonitor" not in (repo / ".git/config").read_text()
    assert "security-relevant: modified config" in ws("status", check=True).stdout
    ws("commit", str(repo / ".git/config"), check=True)
    assert "fsmonitor" in (repo / ".git/config").read_text()


def test_index_only_changes_are_not_copied(repo: Path, ws: Runner, sandboxed: Runner) -> None:
    before = (repo / ".git/index").read_bytes()
    sandboxed("echo four >> a.py && git add a.py")
    ws("commit", check=True)
    assert (repo / ".git/index").read_bytes() == before
    assert git(repo, "status", "--porcelain") == "M a.py"
    git(repo, "fsck", "--strict")


def test_created_refs_are_reported_as_created(repo: Path, ws: Runner, sandboxed: Runner) -> None:
    sandboxed("git branch feature && git tag v1")
    short = git(repo, "rev-parse", "--short=7", "HEAD")
    out = ws("commit", check=True).stdout
    assert f"git: created branch feature at {short}" in out
    assert f"git: created tag v1 at {short}" in out
    assert "0000000" not in out


def test_reflog_entries_keep_gits_messages(repo: Path, ws: Runner, sandboxed: Runner) -> None:
    sandboxed("git checkout -q -b feature && echo four >> a.py && git commit -qam 'Agent: four'")
    ws("commit", check=True)
    assert git(repo, "reflog", "--format=%gs", "feature").splitlines() == \
        ["commit: Agent: four", "branch: Created from HEAD"]
    assert git(repo, "reflog", "--format=%gs", "HEAD").splitlines()[:2] == \
        ["commit: Agent: four", "checkout: moving from main to feature"]
    agrees(repo)


def test_a_symbolic_ref_is_compared_and_changed_as_one(
        repo: Path, ws: Runner, sandboxed: Runner, tmp_path: Path) -> None:
    """A clone's origin/HEAD names origin/main: git work in the sandbox is no change to it,
    and deleting it deletes it, never the branch it names."""
    git(tmp_path, "clone", "-q", "--bare", str(repo), "remote.git")
    git(repo, "remote", "add", "origin", str(tmp_path / "remote.git"))
    git(repo, "fetch", "-q", "origin")
    git(repo, "remote", "set-head", "origin", "main")
    sandboxed("echo four >> a.py && git commit -qam four")
    assert "origin" not in ws("status", check=True).stdout
    sandboxed("git remote set-head -d origin")
    assert "symbolic ref deleted: origin/HEAD (was -> origin/main)" in \
        ws("status", check=True).stdout
    ws("commit", check=True)
    assert git(repo, "rev-parse", "origin/main") == git(repo, "rev-parse", "main~1")
    assert not (repo / ".git/refs/remotes/origin/HEAD").exists()
    agrees(repo)
