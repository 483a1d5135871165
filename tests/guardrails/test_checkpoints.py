"""Checkpoints on real repositories: invisible, gc-proof, exact rewinds, overlap detection."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from gitrepo import Git
from gitrepo import user_view

from manager.guardrails import actions
from manager.guardrails import state as guardstate
from manager.guardrails.shadow import STORE_NAME
from manager.guardrails.shadow import open_shadow
from manager.guardrails.target import for_hook
from manager.session import store
from manager.session.context import Context

SID = "claude-1"


def ckpt(ws, msg: str = "", sid: str = SID) -> dict | None:
    out = ws("checkpoint", "--session", sid, "--json", "-m", msg or "m", check=True).stdout
    return json.loads(out)["checkpoint"]


def listing(ws, sid: str = SID) -> list[dict]:
    out = ws("checkpoints", "--session", sid, "--json", check=True).stdout
    return json.loads(out)["checkpoints"]


def shadow_names(project: Path, tree: str, *flags: str) -> list[str]:
    """Paths in a checkpoint tree, read through the store (the user's git cannot see it)."""
    shadow = open_shadow(project)
    assert shadow is not None
    return shadow.store().out("ls-tree", "--name-only", *flags, tree).split("\n")


def tree_state(root: Path) -> dict[str, tuple[str, bytes]]:
    """Every file under ``root`` (not .git): kind+mode and content."""
    found = {}
    for dirpath, dirnames, names in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in names:
            path = Path(dirpath, name)
            st = path.lstat()
            rel = str(path.relative_to(root))
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", os.readlink(path).encode())
            else:
                found[rel] = (oct(st.st_mode & 0o777), path.read_bytes())
    return found


def prompt(project: Path, sid: str = SID) -> actions.Outcome:
    return actions.on_prompt(actions.Event(sid, str(project)))


def stop(project: Path, sid: str = SID) -> actions.Outcome:
    return actions.on_stop(actions.Event(sid, str(project), stop_hook_active=False))


def start(project: Path, sid: str = SID) -> None:
    actions.on_session_start(actions.Event(sid, str(project)))


def test_stop_checkpoints_only_when_something_changed(git_repo: Git, project: Path, ws):
    start(project)
    stop(project)
    assert listing(ws) == []
    (project / "a.txt").write_text("a\n")
    stop(project)
    stop(project)
    items = listing(ws)
    assert [(i["id"], i["files"], i["lines"], i["auto"]) for i in items] == [(1, 1, 1, True)]


def test_checkpoints_are_invisible_to_the_user_and_touch_nothing(git_repo: Git, project: Path, ws):
    git_repo("branch", "side")
    (project / "src" / "app.py").write_text("stash me\n")
    git_repo("stash", "-q")
    (project / "staged.txt").write_text("staged\n")
    git_repo("add", "staged.txt")
    (project / "tool.sh").write_text("#!/bin/sh\necho unstaged\n")
    start(project)
    before = user_view(project)
    ckpt(ws, "one")
    stop(project)
    prompt(project)
    assert len(listing(ws)) == 1
    assert user_view(project) == before
    assert "workspace" not in git_repo("for-each-ref") + git_repo("log", "--all", "--format=%s")
    assert (project / ".git" / STORE_NAME).is_dir()
    assert not list((project / ".git" / "refs").rglob("*ws*"))


def test_checkpoint_survives_the_users_gc_prune_now(git_repo: Git, project: Path, ws):
    (project / "staged.txt").write_text("content that only the user's index holds\n")
    git_repo("add", "staged.txt")
    start(project)
    first = ckpt(ws, "with staged file")
    git_repo("rm", "-q", "--cached", "staged.txt")
    (project / "staged.txt").unlink()
    git_repo("reflog", "expire", "--expire=now", "--all")
    git_repo("gc", "-q", "--prune=now")
    assert git_repo("cat-file", "-e", f"{first['tree']}:staged.txt", check=False) == ""
    assert "staged.txt" in shadow_names(project, first["tree"])
    ws("rewind", "--session", SID, "1", check=True)
    assert (project / "staged.txt").read_text() == "content that only the user's index holds\n"


def test_rewind_round_trips_deletions_and_exec_bits(git_repo: Git, project: Path, ws):
    start(project)
    original = tree_state(project)
    index_before = (project / ".git" / "index").read_bytes()
    ckpt(ws, "original")
    (project / "tool.sh").chmod(0o644)
    (project / "src" / "app.py").unlink()
    (project / "src" / "new dir").mkdir()
    (project / "src" / "new dir" / "n ü.txt").write_text("new\n")
    (project / "run.sh").write_text("#!/bin/sh\n")
    (project / "run.sh").chmod(0o755)
    (project / "link").symlink_to("tool.sh")
    (project / "debug.log").write_text("ignored files are left alone\n")
    changed = tree_state(project)
    result = json.loads(ws("rewind", "--session", SID, "1", "--json", check=True).stdout)
    assert tree_state(project) == {**original, "debug.log": changed["debug.log"]}
    assert not (project / "src" / "new dir").exists()
    assert (project / ".git" / "index").read_bytes() == index_before
    ws("rewind", "--session", SID, str(result["undo"]), check=True)
    assert tree_state(project) == changed
    assert (project / ".git" / "index").read_bytes() == index_before


def test_no_ghost_files_after_dismiss_and_restart(git_repo: Git, project: Path, ws):
    start(project)
    (project / "ghost.txt").write_text("boo\n")
    stop(project)
    (project / "ghost.txt").unlink()          # dismissed by the user
    (project / "real.txt").write_text("kept\n")
    stop(project)
    items = listing(ws)
    assert shadow_names(project, items[-1]["tree"]) == [
        ".gitignore", "README.txt", "real.txt", "src", "tool.sh"]


def test_overlap_detection_continue_or_fresh(git_repo: Git, project: Path, ws):
    start(project)
    (project / "a.txt").write_text("1\n")
    stop(project)
    (project / "a.txt").write_text("2\n")
    prompt(project)                            # same files: continue
    stop(project)
    items = listing(ws)
    assert items[0]["stream"] == items[1]["stream"]
    (project / "a.txt").unlink()
    prompt(project)                            # clean work tree: fresh
    (project / "a.txt").write_text("3\n")
    stop(project)
    assert listing(ws)[-1]["stream"] != items[1]["stream"]
    third = listing(ws)[-1]["stream"]
    (project / "a.txt").unlink()
    (project / "b.txt").write_text("unrelated\n")
    prompt(project)                            # only unrelated files changed: fresh
    stop(project)
    assert listing(ws)[-1]["stream"] != third
    fourth = listing(ws)[-1]
    git_repo("add", "-A")
    git_repo("commit", "-qm", "user commits")
    (project / "b.txt").write_text("after commit\n")
    prompt(project)                            # HEAD moved: fresh, parented on the new HEAD
    stop(project)
    last = listing(ws)[-1]
    assert last["stream"] != fourth["stream"] and last["base"] == git_repo("rev-parse", "HEAD").strip()


def test_warning_about_other_sessions_is_opt_in(git_repo: Git, project: Path, ws,
                                                monkeypatch: pytest.MonkeyPatch):
    start(project, "other")
    (project / "a.txt").write_text("theirs\n")
    stop(project, "other")
    start(project)
    assert prompt(project) == actions.QUIET
    monkeypatch.setenv("WORKSPACE_CHECKPOINTS__WARN_OTHER_SESSIONS", "1")
    out = prompt(project)
    assert "other" in (out.notice or "") and out.context == out.notice


def test_prune_and_size_cap(git_repo: Git, project: Path, ws, monkeypatch: pytest.MonkeyPatch):
    start(project, "old")
    (project / "big.bin").write_bytes(os.urandom(300_000))
    stop(project, "old")
    start(project)
    monkeypatch.setenv("WORKSPACE_CHECKPOINTS__MAX_SIZE_MB", "0")
    (project / "big.bin").write_bytes(os.urandom(300_000))
    stop(project)
    assert listing(ws, "old") == []              # the oldest stream went to respect the cap
    assert len(listing(ws)) == 1                 # the current one is kept
    report = json.loads(ws("checkpoints", "prune", "--all", "--now", "--session", SID,
                           "--json", check=True).stdout)
    assert len(report["removed"]) == 1 and report["size_after"] < report["size_before"]
    assert listing(ws) == []


def test_cli_listing_and_nothing_to_checkpoint(git_repo: Git, project: Path, ws):
    start(project)
    out = ws("checkpoint", "--session", SID, check=True).stdout
    assert "checkpoint 1" in out                 # a manual checkpoint of a clean tree is allowed
    assert "nothing changed" in ws("checkpoint", "--session", SID, check=True).stdout
    text = ws("checkpoints", "--session", SID, check=True).stdout
    assert "manual" in text or " m" in text
    bad = ws("rewind", "--session", SID, "99")
    assert bad.returncode == 1 and "no checkpoint" in bad.stderr


# -- with the real overlay engine -------------------------------------------------------


def view(ws, script: str) -> str:
    return ws("run", "--session", SID, "--", "sh", "-c", script, check=True).stdout


def test_overlay_changes_count_and_checkpoint(git_repo: Git, project: Path, ws, overlay_engine: str):
    start(project)
    before = user_view(project)
    view(ws, "seq 1 400 > sandboxed.txt; rm tool.sh; echo x >> src/app.py")
    assert not (project / "sandboxed.txt").exists()
    out = stop(project)
    assert out.block is not None and "sandboxed.txt (400)" in out.block
    item = listing(ws)[0]
    names = shadow_names(project, item["tree"], "-r")
    assert "sandboxed.txt" in names and "tool.sh" not in names
    assert item["worktree"] != item["tree"]
    assert user_view(project) == before


def test_overlay_rewind_restores_worktree_and_view_exactly(git_repo: Git, project: Path, ws,
                                                           overlay_engine: str):
    start(project)
    view(ws, "echo one > sb.txt; chmod +x sb.txt; rm src/app.py")
    (project / "direct.txt").write_text("edited directly\n")
    first = ckpt(ws, "first")
    seen_first = view(ws, "ls -l sb.txt | cut -c1-10; ls src; cat direct.txt")
    view(ws, "echo two > sb.txt; chmod -x sb.txt; echo back > src/app.py; echo more > m.txt")
    (project / "direct.txt").unlink()
    (project / "direct2.txt").write_text("second\n")
    ckpt(ws, "second")
    real_second = tree_state(project)
    seen_second = view(ws, "ls -l sb.txt | cut -c1-10; cat sb.txt src/app.py m.txt direct2.txt")
    result = json.loads(ws("rewind", "--session", SID, str(first["id"]), "--json",
                           check=True).stdout)
    assert view(ws, "ls -l sb.txt | cut -c1-10; ls src; cat direct.txt") == seen_first
    assert view(ws, "cat sb.txt; ls m.txt direct2.txt 2>&1 | wc -l") == "one\n2\n"
    assert (project / "direct.txt").read_text() == "edited directly\n"
    assert not (project / "sb.txt").exists() and (project / "src" / "app.py").exists()
    ws("rewind", "--session", SID, str(result["undo"]), check=True)
    assert tree_state(project) == real_second
    assert view(ws, "ls -l sb.txt | cut -c1-10; cat sb.txt src/app.py m.txt direct2.txt") == \
        seen_second


def test_no_ghosts_after_the_sandbox_is_dismissed_and_restarted(git_repo: Git, project: Path, ws,
                                                                overlay_engine: str):
    start(project)
    view(ws, "echo ghost > ghost.txt")
    stop(project)
    session = store.load(SID)
    Context.load(str(project)).engine(session).destroy(session)   # the user discards it all
    store.remove(session)
    assert guardstate.read(SID)["checkpoints"]["items"]         # state kept in a side file
    view(ws, "echo fresh > fresh.txt")                          # a new sandbox, same id
    prompt(project)
    stop(project)
    last = listing(ws)[-1]
    names = shadow_names(project, last["tree"])
    assert "fresh.txt" in names and "ghost.txt" not in names
    target = for_hook(SID, str(project))
    assert target.snapshot().view == last["tree"]


def test_repository_without_commits(project: Path, ws, git_env: None):
    from gitrepo import init_repo

    init_repo(project)
    start(project)
    (project / "first.txt").write_text("1\n")
    stop(project)
    (project / "first.txt").unlink()
    (project / "second.txt").write_text("2\n")
    stop(project)
    assert [i["base"] for i in listing(ws)] == [None, None]
    ws("rewind", "--session", SID, "1", check=True)
    assert (project / "first.txt").exists() and not (project / "second.txt").exists()
    assert json.loads(ws("budget", "--session", SID, "--json", check=True).stdout)["used"] == 1


def test_overlay_view_is_memoised_only_while_nothing_changed(git_repo: Git, project: Path, ws,
                                                             overlay_engine: str,
                                                             monkeypatch: pytest.MonkeyPatch):
    from manager.guardrails import shadow as shadow_mod

    start(project)
    view(ws, "echo aaa > sb.txt; rm tool.sh")
    target = for_hook(SID, str(project))
    monkeypatch.setattr(shadow_mod, "RACY_S", 60.0)
    first = target.snapshot()
    assert not target.shadow.view_notes.exists()          # too fresh to trust its mtime
    monkeypatch.setattr(shadow_mod, "RACY_S", 0.0)
    assert target.snapshot() == first and target.shadow.view_notes.exists()

    def no_apply(*args: object) -> bool:
        raise AssertionError("the memo should have answered")

    with monkeypatch.context() as m:
        m.setattr(shadow_mod, "apply_overlay", no_apply)
        assert target.snapshot() == first
    view(ws, "echo bbb > sb.txt")                          # same size, new content
    second = target.snapshot()
    assert second.view != first.view
    (project / "direct.txt").write_text("d\n")             # the work tree moves: recomputed
    third = target.snapshot()
    target.shadow.view_notes.unlink()
    assert target.snapshot() == third != second
