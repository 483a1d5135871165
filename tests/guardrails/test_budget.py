"""The diff budget on real repositories: baseline, measure, Stop decisions, reset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gitrepo import Git
from gitrepo import init_repo
from gitrepo import make_git
from gitrepo import user_view

from manager.claude.guard import outcome_for
from manager.guardrails import actions

SID = "claude-1"


def start(project: Path, sid: str = SID) -> actions.Outcome:
    return actions.on_session_start(actions.Event(sid, str(project)))


def stop(project: Path, sid: str = SID, active: bool = False, subagent: bool = False) -> actions.Outcome:
    return actions.on_stop(actions.Event(sid, str(project), stop_hook_active=active),
                           subagent=subagent)


def lines(n: int, tag: str = "x") -> str:
    return "".join(f"{tag} {i}\n" for i in range(n))


def budget_json(ws, *args: str) -> actions.Outcome:
    return json.loads(ws("budget", "--session", SID, "--json", *args, check=True).stdout)


def test_under_the_limit_allows_and_over_it_blocks_with_figure_and_files(git_repo: Git, project: Path):
    assert start(project) == actions.QUIET
    (project / "small.txt").write_text(lines(10))
    assert stop(project) == actions.QUIET
    (project / "big one.txt").write_text(lines(400))
    out = stop(project)
    assert out.block
    assert "410/300 lines changed" in (out.block or "")
    assert "big one.txt (400)" in (out.block or "")
    assert "/workspace:reset" in (out.block or "")


def test_stop_hook_active_blocks_at_most_once_per_stop_sequence(git_repo: Git, project: Path):
    start(project)
    (project / "big.txt").write_text(lines(400))
    assert stop(project).block
    again = stop(project, active=True)
    assert again.block is None and "not blocking again" in (again.notice or "")
    # A new stop sequence (stop_hook_active false) blocks again until a reset.
    assert stop(project).block


def test_max_blocks_is_configurable(git_repo: Git, project: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("WORKSPACE_BUDGET__MAX_BLOCKS", "2")
    start(project)
    (project / "big.txt").write_text(lines(400))
    assert stop(project).block
    assert stop(project, active=True).block
    assert stop(project, active=True).block is None


def test_subagents_can_be_excluded(git_repo: Git, project: Path, monkeypatch: pytest.MonkeyPatch):
    start(project)
    (project / "big.txt").write_text(lines(400))
    assert stop(project, subagent=True).block
    monkeypatch.setenv("WORKSPACE_BUDGET__SUBAGENTS", "false")
    assert stop(project, subagent=True) == actions.QUIET


def test_reset_rebaselines_and_is_idempotent(git_repo: Git, project: Path, ws):
    start(project)
    (project / "big.txt").write_text(lines(400))
    assert stop(project).block
    before = user_view(project)
    first = json.loads(ws("reset", "--session", SID, "--json", check=True).stdout)
    second = json.loads(ws("reset", "--session", SID, "--json", check=True).stdout)
    assert first["baseline"] == second["baseline"]
    assert stop(project) == actions.QUIET
    assert budget_json(ws)["used"] == 0
    assert user_view(project) == before


def test_baseline_leaves_index_head_branches_and_stash_alone(git_repo: Git, project: Path, ws):
    git = git_repo
    git("branch", "feature")
    (project / "src" / "app.py").write_text(lines(5, "stashed"))
    git("stash", "-q")
    (project / "src" / "app.py").write_text(lines(60))
    git("add", "src/app.py")                                  # staged
    (project / "src" / "app.py").write_text(lines(70))        # and unstaged on top
    (project / "tool.sh").write_text("#!/bin/sh\necho changed\n")   # unstaged only
    (project / "untracked.txt").write_text("u\n")
    (project / "debug.log").write_text("ignored\n")
    before = user_view(project)
    start(project)
    (project / "new.txt").write_text(lines(3))
    before_new = user_view(project)
    assert stop(project) == actions.QUIET
    assert budget_json(ws)["used"] == 3
    ws("checkpoint", "--session", SID, "-m", "x", check=True)
    ws("checkpoints", "--session", SID, check=True)
    assert user_view(project) == before_new
    (project / "new.txt").unlink()
    assert user_view(project) == before


def test_metric_files_and_weights(git_repo: Git, project: Path, ws, monkeypatch: pytest.MonkeyPatch):
    start(project)
    (project / "src" / "app.py").write_text(lines(10))       # 50 deleted, 10 added
    (project / "a.txt").write_text(lines(5))
    assert budget_json(ws)["used"] == 65
    monkeypatch.setenv("WORKSPACE_BUDGET__WEIGHTS__DELETED", "0.5")
    assert budget_json(ws)["used"] == 40
    monkeypatch.setenv("WORKSPACE_BUDGET__METRIC", "files")
    report = budget_json(ws)
    assert report["used"] == 2 and report["metric"] == "files"


def test_binary_rename_spaces_unicode(git_repo: Git, project: Path, ws):
    git = git_repo
    (project / "blob.bin").write_bytes(bytes(range(256)) * 4)
    (project / "moved.py").write_text(lines(200, "keep"))
    git("add", "-A")
    git("commit", "-qm", "more")
    start(project)
    (project / "blob.bin").write_bytes(bytes(range(255, -1, -1)) * 4)
    (project / "moved.py").rename(project / "renamed.py")
    (project / "spaced näme ü.txt").write_text(lines(2))
    report = budget_json(ws)
    by_path = {f["path"]: f for f in report["files"]}
    assert by_path["blob.bin"]["kind"] == "binary" and by_path["blob.bin"]["cost"] == 10
    assert by_path["moved.py -> renamed.py"]["cost"] == 1          # a pure rename: one change
    assert by_path["spaced näme ü.txt"]["added"] == 2
    assert report["used"] == 13


def test_submodule_counts_as_one_change(git_repo: Git, project: Path, tmp_path: Path, ws):
    inner = tmp_path / "inner"
    igit = init_repo(inner)
    (inner / "f.txt").write_text(lines(100))
    igit("add", "-A")
    igit("commit", "-qm", "one")
    git_repo("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(inner), "sub")
    git_repo("commit", "-qm", "add submodule")
    start(project)
    subgit = make_git(project / "sub")
    subgit("config", "user.name", "T")
    subgit("config", "user.email", "t@e")
    (project / "sub" / "f.txt").write_text(lines(500, "y"))
    subgit("commit", "-qam", "big change inside")
    report = budget_json(ws)
    assert [(f["path"], f["kind"], f["cost"]) for f in report["files"]] == [("sub", "submodule", 1)]


def test_baseline_objects_garbage_collected_rebaseline_with_notice(git_repo: Git, project: Path, ws):
    git = git_repo
    (project / "staged.txt").write_text(lines(30, "only in the index"))
    git("add", "staged.txt")                 # its blob exists only as a loose object of the user's
    start(project)
    git("rm", "-q", "--cached", "staged.txt")
    (project / "staged.txt").unlink()
    git("gc", "-q", "--prune=now")
    out = stop(project)
    assert "re-baselined" in (out.notice or "")
    assert budget_json(ws)["used"] == 0


def test_concurrent_sessions_have_their_own_baselines(git_repo: Git, project: Path, ws):
    start(project, "one")
    (project / "a.txt").write_text(lines(400))
    start(project, "two")
    assert stop(project, "one").block
    assert stop(project, "two") == actions.QUIET
    (project / "b.txt").write_text(lines(20))
    two = json.loads(ws("budget", "--session", "two", "--json", check=True).stdout)
    assert two["used"] == 20


def test_non_git_directory_turns_the_feature_off_quietly(project: Path, ws, git_env: None):
    (project / "big.txt").write_text(lines(400))
    assert start(project) == actions.QUIET
    assert stop(project) == actions.QUIET
    assert actions.on_prompt(actions.Event(SID, str(project))) == actions.QUIET
    assert not (project / ".git").exists()
    out = ws("budget", "--session", SID, check=False)
    assert out.returncode in (0, 1)


def test_hooks_tolerate_malformed_and_unknown_input(git_repo: Git, project: Path):
    # The plugin reads the hook's JSON into the guard rails' typed event.
    assert outcome_for("on_stop", {}).notice
    assert outcome_for("on_stop", {"session_id": 5}).notice
    assert outcome_for("on_stop", {"session_id": "../../etc"}).notice
    assert outcome_for("on_stop", []).notice  # type: ignore[arg-type]
    start(project)
    assert outcome_for("on_stop", {"session_id": SID, "cwd": str(project),
                                   "new_field": [1]}) == actions.QUIET


def test_recorded_payloads(git_repo: Git, project: Path):
    samples = Path(__file__).resolve().parents[1] / "claude" / "samples"   # recorded from the client
    for name, call in (("SessionStart", "on_session_start"), ("UserPromptSubmit", "on_prompt"),
                       ("Stop", "on_stop"), ("Stop_stop_hook_active_true", "on_stop")):
        payload = json.loads((samples / f"{name}.json").read_text())
        payload.update(cwd=str(project), session_id=SID)
        assert outcome_for(call, payload) == actions.QUIET, name
