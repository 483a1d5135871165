"""Snapshots taken incrementally (status on our index, add of what changed) match a full add -A."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from gitrepo import Git
from gitrepo import init_repo
from gitrepo import user_view

from manager.git import plumbing as gitplumbing
from manager.git.plumbing import parse_status
from manager.guardrails.shadow import Shadow
from manager.guardrails.shadow import _noted_tree
from manager.guardrails.shadow import open_shadow
from manager.guardrails.shadow import take


def reference_tree(project: Path, tmp_path: Path) -> str:
    """The tree a from-scratch ``git add -A`` into an empty index gives."""
    index = tmp_path / "reference-index"
    index.unlink(missing_ok=True)
    env = {**os.environ, "GIT_INDEX_FILE": str(index)}
    for args in (["add", "-A", "--", ":/"], ["write-tree"]):
        proc = subprocess.run(["git", "-c", "advice.addEmbeddedRepo=false", *args], cwd=project,
                              env=env, capture_output=True, text=True, check=True)
    return proc.stdout.strip()


def edit_size_kept(p: Path) -> None:
    """Same size, same second: only git's racy-entry check can see it."""
    p.write_text(p.read_text().replace("line 1\n", "LINE 1\n"))


def make_nested(p: Path) -> None:
    git = init_repo(p / "nested")
    (p / "nested" / "n.txt").write_text("n\n")
    git("add", "-A")
    git("commit", "-qm", "n")


STEPS: list[tuple[str, Callable[[Path], object]]] = [
    ("edit", lambda p: (p / "src" / "app.py").write_text("changed\n")),
    ("edit, same size", lambda p: edit_size_kept(p / "src" / "app.py")),
    ("new file in new dirs", lambda p: (p / "a" / "b").mkdir(parents=True)
     or (p / "a" / "b" / "new file ü.txt").write_text("new\n")),
    ("delete", lambda p: (p / "tool.sh").unlink()),
    ("exec bit", lambda p: (p / "a" / "b" / "new file ü.txt").chmod(0o755)),
    ("symlink", lambda p: (p / "link").symlink_to("src/app.py")),
    ("file becomes a directory", lambda p: (p / "link").unlink() or (p / "link").mkdir()
     or (p / "link" / "inside").write_text("i\n")),
    ("ignored file", lambda p: (p / "debug.log").write_text("ignored\n")),
    ("ignore rule dropped", lambda p: (p / ".gitignore").write_text("build/\n")),
    ("ignore rule added", lambda p: (p / ".gitignore").write_text("*.log\nlink/\n")),
    ("touch only", lambda p: os.utime(p / "src" / "app.py")),
    ("nested repository", make_nested),
    ("nothing", lambda p: None),
    ("empty directory", lambda p: (p / "empty").mkdir()),
    ("file in the empty directory", lambda p: (p / "empty" / "f").write_text("f\n")),
]


def test_each_snapshot_matches_a_full_add_all(git_repo: Git, project: Path, tmp_path: Path):
    shadow = open_shadow(project)
    assert shadow is not None
    before = user_view(project)
    take(shadow)
    for name, step in STEPS:
        step(project)
        user = user_view(project)
        snap = take(shadow)
        assert snap.worktree == reference_tree(project, tmp_path), name
        assert snap.head == git_repo("rev-parse", "HEAD").strip()
        assert take(shadow).worktree == snap.worktree, f"{name}, again"
        assert user_view(project) == user, name
    assert before["refs"] == user_view(project)["refs"]


def test_no_stray_files_in_the_store(git_repo: Git, project: Path):
    shadow = open_shadow(project)
    assert shadow is not None
    for i in range(4):
        take(shadow)
        (project / f"f{i % 2}.txt").write_text(f"{i}\n")
    assert sorted(p.name for p in shadow.tmp.iterdir()) == sorted(
        [shadow.index_cache.name, shadow.tree_note.name])


def test_the_note_holds_for_its_own_index_file_only(git_repo: Git, project: Path):
    shadow = open_shadow(project)
    assert shadow is not None
    first = take(shadow)
    assert _noted_tree(shadow, shadow.index_cache) == first.worktree
    (project / "x.txt").write_text("x\n")
    changed = take(shadow)
    assert _noted_tree(shadow, shadow.index_cache) == changed.worktree != first.worktree
    copy = shadow.tmp / "copy"
    shutil.copy2(shadow.index_cache, copy)
    assert _noted_tree(shadow, copy) is None             # same bytes, another file
    shadow.tree_note.write_text("garbage")
    assert _noted_tree(shadow, shadow.index_cache) is None
    assert take(shadow).worktree == changed.worktree


def test_a_long_list_of_changes_falls_back_to_a_full_add(git_repo: Git, project: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(gitplumbing, "MAX_PATHSPECS", 3)
    shadow = open_shadow(project)
    assert shadow is not None
    take(shadow)
    for i in range(5):
        (project / f"many{i}.txt").write_text(f"{i}\n")
    assert take(shadow).worktree == reference_tree(project, tmp_path)


def test_unborn_head_and_no_index(project: Path, git_env: None, tmp_path: Path):
    init_repo(project)
    (project / "f.txt").write_text("f\n")
    shadow = open_shadow(project)
    assert isinstance(shadow, Shadow)
    snap = take(shadow)
    assert snap.head is None and snap.worktree == reference_tree(project, tmp_path)
    assert not (project / ".git" / "index").exists()


def test_parse_status_records():
    data = b"\0".join([
        b"# branch.oid (initial)", b"# branch.head main",
        b"1 .M N... 100644 100644 100644 " + b"a" * 40 + b" " + b"a" * 40 + b" with space.txt",
        b"1 M. N... 100644 100644 100644 " + b"a" * 40 + b" " + b"b" * 40 + b" staged-only",
        b"2 .M N... 100644 100644 100644 " + b"a" * 40 + b" " + b"a" * 40 + b" R100 new",
        b"old", b"u UU N... 100644 100644 100644 100644 " + b"c" * 40 + b" " + b"d" * 40 + b" "
        + b"e" * 40 + b" both", b"? new dir/f", b"? nested/", b""])
    scan = parse_status(data)
    assert scan.head is None
    assert scan.paths == [b"with space.txt", b"new", b"both", b"new dir/f", b"nested/"]
    assert parse_status(b"# branch.oid " + b"f" * 40 + b"\0").head == "f" * 40


def test_store_gc_clears_old_scratch_files_only(git_repo: Git, project: Path):
    from manager.guardrails.checkpoints import _clean_tmp

    shadow = open_shadow(project)
    assert shadow is not None
    take(shadow)
    for name in ("index.1.ab", "cache.2.cd", "note.3.ef", "blob.4.0", "other"):
        (shadow.tmp / name).write_text("x")
    _clean_tmp(shadow, time.time() - 3600)
    assert len(list(shadow.tmp.iterdir())) == 7            # all young: maybe in use
    _clean_tmp(shadow, time.time() + 1)
    assert sorted(p.name for p in shadow.tmp.iterdir()) == sorted(
        [shadow.index_cache.name, shadow.tree_note.name, "other"])


@pytest.mark.parametrize("where", ["nested .gitignore", "info/exclude", "global excludes"])
def test_files_added_before_a_rule_ignores_them_leave_the_snapshot(
        git_repo: Git, project: Path, tmp_path: Path, where: str):
    shadow = open_shadow(project)
    assert shadow is not None
    (project / "src" / "out").mkdir()
    (project / "src" / "out" / "gen.o").write_text("o\n")
    (project / "src" / "keep.c").write_text("c\n")
    take(shadow)
    time.sleep(0.01)
    if where == "nested .gitignore":
        (project / "src" / ".gitignore").write_text("out/\n")
    elif where == "info/exclude":
        (project / ".git" / "info").mkdir(exist_ok=True)
        (project / ".git" / "info" / "exclude").write_text("src/out/\n")
    else:
        (tmp_path / "config" / "git").mkdir(parents=True)
        (tmp_path / "config" / "git" / "ignore").write_text("*.o\n")
    (project / "src" / "keep.c").write_text("c2\n")      # the next change notices the new rule
    snap = take(shadow)
    assert snap.worktree == reference_tree(project, tmp_path)
    assert "src/out/gen.o" not in shadow.work().out("ls-tree", "-r", "--name-only", snap.worktree)


def test_what_the_user_tracks_stays_even_when_ignored(git_repo: Git, project: Path):
    shadow = open_shadow(project)
    assert shadow is not None
    (project / "notes.txt").write_text("mine, untracked\n")
    take(shadow)
    (project / ".gitignore").write_text("*.txt\n*.sh\n")
    snap = take(shadow)
    names = shadow.work().out("ls-tree", "-r", "--name-only", snap.worktree).split("\n")
    assert "README.txt" in names and "tool.sh" in names       # tracked by the user
    assert "notes.txt" not in names                           # only ever ours


def test_a_damaged_cache_is_replaced_by_the_users_index(git_repo: Git, project: Path, tmp_path: Path):
    shadow = open_shadow(project)
    assert shadow is not None
    take(shadow)
    (project / "new.txt").write_text("n\n")
    data = shadow.index_cache.read_bytes()
    shadow.index_cache.unlink()                  # never written in place: a new file
    shadow.index_cache.write_bytes(b"JUNK" + data[4:])   # git: bad signature
    assert take(shadow).worktree == reference_tree(project, tmp_path)
    assert take(shadow).worktree == reference_tree(project, tmp_path)


def test_concurrent_snapshots_share_the_cache_safely(git_repo: Git, project: Path, tmp_path: Path):
    (project / "new.txt").write_text("n\n")
    (project / "src" / "app.py").write_text("changed\n")
    code = ("import sys; from pathlib import Path; from manager.guardrails.shadow import open_shadow, take\n"
            "s = open_shadow(Path(sys.argv[1]))\n"
            "print(' '.join(take(s).worktree for _ in range(6)))")
    root = Path(__file__).resolve().parents[2]
    procs = [subprocess.Popen([sys.executable, "-c", code, str(project)], cwd=root,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    results = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), results
    trees = {t for out, _ in results for t in out.split()}
    assert trees == {reference_tree(project, tmp_path)}
    shadow = open_shadow(project)
    assert shadow is not None
    assert sorted(p.name for p in shadow.tmp.iterdir()) == sorted(
        [shadow.index_cache.name, shadow.tree_note.name])
