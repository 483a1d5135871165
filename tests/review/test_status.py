"""``workspace status`` reads like git status at any size: grouped, collapsed, git-aware."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.conftest import Runner
from tests.conftest import git

MANY = 3000
MAKE_VENV = (f"mkdir -p .venv/lib && i=0; while [ $i -lt {MANY} ]; do "
             "echo $i > .venv/lib/f$i; i=$((i+1)); done")


def test_ignored_directory_is_one_line_and_both_edits_are_named(
        repo: Path, ws: Runner, sandboxed: Runner) -> None:
    sandboxed(f"{MAKE_VENV}; echo four >> a.py; echo 'x = 2' > b.py")
    out = ws("status", check=True).stdout.splitlines()
    assert len(out) <= 15, "\n".join(out)
    text = "\n".join(out)
    assert "modified:  a.py" in text and "modified:  b.py" in text
    assert f".venv/ ({MANY:,} files)" in text
    assert "2 files changed in the project (+2 -1 lines), 3,000 ignored" in text


def test_all_and_json_list_every_file(repo: Path, ws: Runner, sandboxed: Runner) -> None:
    sandboxed(f"{MAKE_VENV}; echo four >> a.py")
    listed = ws("status", "--all", check=True).stdout
    assert all(f".venv/lib/f{i}\n" in listed for i in range(MANY))
    changes = json.loads(ws("status", "--json", check=True).stdout)["changes"]
    paths = {Path(c["path"]).name for c in changes}
    assert {f"f{i}" for i in range(MANY)} <= paths and "a.py" in paths


def test_new_directory_collapses_unless_named(repo: Path, ws: Runner, sandboxed: Runner) -> None:
    sandboxed("mkdir -p gen/sub && touch gen/1 gen/2 gen/sub/3")
    assert "added:     gen/ (3 files)" in ws("status", check=True).stdout
    named = ws("status", "gen", check=True).stdout
    assert "gen/sub/3" in named and "gen/1" in named


def test_outside_the_project_is_grouped_by_root(
        repo: Path, ws: Runner, sandboxed: Runner, isolated_state: Path) -> None:
    home = isolated_state
    (home / ".cache").mkdir()
    sandboxed("for i in 1 2 3 4 5; do mkdir -p ~/.cache/t$i; touch ~/.cache/t$i/f; done")
    out = ws("status", check=True).stdout
    assert "~/.cache/ (5 files in 5 entries)" in out
    assert str(home / ".cache/t1") in ws("status", "--all", check=True).stdout


def test_short_form(repo: Path, ws: Runner, sandboxed: Runner) -> None:
    sandboxed(f"{MAKE_VENV}; echo four >> a.py; rm b.py; mkdir n; touch n/x")
    lines = ws("status", "--short", check=True).stdout.splitlines()
    assert lines[:3] == ["M  a.py", "D  b.py", "A  n/ (1 file)"]
    assert "!! .venv/" in lines


def test_an_agent_commit_reads_as_a_commit(repo: Path, ws: Runner, sandboxed: Runner) -> None:
    sandboxed("echo four >> a.py && git commit -qam 'Agent: add four' "
              "&& git branch feature && git tag v1")
    out = ws("status", check=True).stdout
    assert "1 new commit on main" in out
    assert "Agent: add four" in out
    assert "branch created: feature" in out and "tag created: v1" in out
    assert ".git/objects" not in out and ".git/index" not in out and "logs/HEAD" not in out
    assert ".git/objects/" in ws("status", "--all", check=True).stdout


def test_stash_and_deleted_branch(repo: Path, ws: Runner, sandboxed: Runner) -> None:
    git(repo, "branch", "old")
    sandboxed("echo four >> a.py && git stash -q && git branch -D old -q")
    out = ws("status", check=True).stdout
    assert "stash: 1 new entry" in out
    assert "branch deleted: old" in out


def test_git_config_and_hooks_are_security_relevant(
        repo: Path, ws: Runner, sandboxed: Runner) -> None:
    sandboxed("git config core.fsmonitor 'touch /tmp/x' && printf '#!/bin/sh\\n' > .git/hooks/pre-commit"
              " && printf '[submodule \"s\"]\\n' > .gitmodules")
    out = ws("status", check=True).stdout
    assert "security-relevant: modified config" in out
    assert "security-relevant: added pre-commit" in out
    assert "security-relevant: added .gitmodules" in out


def test_long_output_goes_through_a_pager_on_a_terminal(
        repo: Path, ws: Runner, sandboxed: Runner, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from tests.review.pty_driver import converse

    sandboxed("mkdir d && i=0; while [ $i -lt 200 ]; do touch d/f$i; i=$((i+1)); done")
    paged = tmp_path / "paged.txt"
    monkeypatch.setenv("WORKSPACE_PAGER", f"sh -c 'cat > {paged}'")
    code, screen = converse([sys.executable, "-m", "manager", "status", "--all"], repo, [])
    assert code == 0, screen
    assert "d/f199" in paged.read_text() and "d/f199" not in screen
    piped = ws("status", "--all", check=True).stdout      # not a terminal: no pager
    assert "d/f199" in piped


def test_a_recorded_review_never_shows_a_stale_verdict(
        repo: Path, ws: Runner, sandboxed: Runner) -> None:
    sandboxed("echo 'x = 2' > b.py && mkdir -p gen && touch gen/1 gen/2")
    time.sleep(2.2)                 # settled: the next review records them
    assert "modified:  b.py" in ws("status", check=True).stdout
    records = list(Path(os.environ["XDG_STATE_HOME"]).glob("workspace/sessions/*/review.cache"))
    assert len(records) == 1
    sandboxed("echo 'x = 1' > b.py && touch gen/3")   # same size, the real content again
    out = ws("status", check=True).stdout
    assert "b.py" not in out and "added:     gen/ (3 files)" in out
    (repo / "b.py").write_text("x = 3\n")              # the user edits the real file
    assert "modified:  b.py" in ws("status", check=True).stdout


@pytest.mark.parametrize("script", ["echo four >> a.py", "rm b.py",
                                    "echo four >> a.py; rm b.py; printf 'y\\n' > c.py"])
def test_diff_stat_ends_with_gits_summary_line(
        repo: Path, ws: Runner, sandboxed: Runner, script: str) -> None:
    """The totals line is git's, word for word: plurals, and a zero count left out."""
    sandboxed(script)
    ours = ws("diff", "--stat", check=True).stdout.splitlines()[-1]
    ws("commit", check=True)
    git(repo, "add", "-A")
    theirs = git(repo, "diff", "--cached", "--stat", "HEAD").splitlines()[-1]
    assert ours.strip() == theirs.strip()


def test_lines_of_files_in_a_new_directory_count_as_added(
        repo: Path, ws: Runner, sandboxed: Runner) -> None:
    sandboxed("mkdir -p d/e && printf 'a\\nb\\n' > d/x && echo c > d/e/y && echo n > n.py")
    assert "3 files changed in the project (+4 -0 lines)" in ws("status", check=True).stdout
