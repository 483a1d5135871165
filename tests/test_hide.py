"""The ``hide`` setting (issue 24): what it holds, who may change it, what it resolves to.
The engines' side (nothing hidden is ever read in a sandbox) is tests/engines/test_hide.py."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from manager import config
from manager import hide

SECRETS = ("~/.ssh", "~/.gnupg", "~/.aws", "~/.azure", "~/.config/gcloud", "~/.kube",
           "~/.docker/config.json", "~/.netrc", "~/.git-credentials", "~/.config/gh",
           "~/.pypirc", "~/.npmrc", "~/.mozilla", "~/.config/google-chrome", "~/.config/chromium")


def _write_user_config(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config" / "workspace" / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _targets(project: Path) -> list[str]:
    return [t.path for t in hide.targets(config.load(project), str(project))]


def test_defaults_hide_the_usual_credentials_and_the_projects_own_state(project: Path,
                                                                        isolated_state: Path):
    assert set(SECRETS) <= set(config.load(project)["hide"])
    for name in (".ssh", ".aws", ".config/gh"):
        (isolated_state / name).mkdir(parents=True)
    (isolated_state / ".netrc").write_text("machine x password p\n")
    state = Path(os.environ["XDG_STATE_HOME"]) / "workspace"
    state.mkdir(parents=True)
    found = {t.path: t.is_dir for t in hide.targets(config.load(project), str(project))}
    assert found == {str(isolated_state / ".ssh"): True, str(isolated_state / ".aws"): True,
                     str(isolated_state / ".config/gh"): True,
                     str(isolated_state / ".netrc"): False, str(state): True}


def test_an_untrusted_project_file_adds_but_never_removes(project: Path, tmp_path: Path,
                                                          isolated_state: Path):
    (isolated_state / ".ssh").mkdir()
    (tmp_path / "extra").mkdir()
    project_file = project / config.PROJECT_FILE
    project_file.write_text(f"hide: [{tmp_path / 'extra'}]\n")
    loaded = config.load(project)
    assert set(SECRETS) | {str(tmp_path / "extra")} <= set(loaded["hide"])
    assert "hide" not in loaded.ignored
    assert {str(isolated_state / ".ssh"), str(tmp_path / "extra")} <= set(_targets(project))
    project_file.write_text("hide: []\n")          # an attempt to show everything
    assert set(SECRETS) <= set(config.load(project)["hide"])
    config.set_trust(project_file, True)           # the user's say-so: the file decides
    assert config.load(project)["hide"] == []
    assert str(isolated_state / ".ssh") not in _targets(project)


def test_the_users_own_config_decides_but_the_state_stays_hidden(project: Path, tmp_path: Path,
                                                                 isolated_state: Path):
    (isolated_state / ".ssh").mkdir()
    state = Path(os.environ["XDG_STATE_HOME"]) / "workspace"
    state.mkdir(parents=True)
    _write_user_config(tmp_path, "hide: []\n")
    assert config.load(project)["hide"] == []
    assert _targets(project) == [str(state)]


def test_globs_symlinks_and_what_cannot_be_hidden(project: Path, tmp_path: Path):
    keys = tmp_path / "keys"
    (keys / "deep").mkdir(parents=True)
    for name in ("a.pem", "deep/b.pem", "c.txt"):
        (keys / name).write_text("k")
    (tmp_path / "link").symlink_to(keys / "c.txt")
    (project / "sub").mkdir()
    found = hide.resolve([f"{keys}/**/*.pem", str(tmp_path / "link"), str(project / "sub"),
                          str(project), str(tmp_path), "/", str(tmp_path / "absent")],
                         str(project))
    # The project and what holds it would leave the sandbox nothing: never hidden.
    assert [t.path for t in found] == [str(keys / "a.pem"), str(keys / "c.txt"),
                                       str(keys / "deep/b.pem"), str(project / "sub")]
    assert hide.resolve([str(keys), str(keys / "a.pem")], str(project))[0].path == str(keys)
    assert len(hide.resolve([str(keys), str(keys / "a.pem")], str(project))) == 1
    rel = hide.resolve(["sub"], str(project))
    assert [t.path for t in rel] == [str(project / "sub")]


def test_claude_codes_read_denials_are_hidden_too(project: Path, tmp_path: Path,
                                                  isolated_state: Path):
    for name in ("denied-abs", "denied-home", "by-rule", "by-home-rule"):
        (tmp_path / name).mkdir(exist_ok=True)
    (isolated_state / "denied-home").mkdir()
    (isolated_state / "by-home-rule").mkdir()
    (project / ".env").write_text("TOKEN=1\n")
    (project / "nested").mkdir()
    (project / "nested" / ".env").write_text("TOKEN=2\n")
    (project / "private").mkdir()
    user = isolated_state / ".claude" / "settings.json"
    user.parent.mkdir()
    user.write_text(json.dumps({
        "sandbox": {"filesystem": {"denyRead": [f"/{tmp_path}/denied-abs", "~/denied-home"]}},
        "permissions": {"deny": [f"Read(/{tmp_path}/by-rule/**)", "Read(~/by-home-rule)",
                                 "Bash(rm:*)"],
                        "allow": [f"Read(/{tmp_path}/denied-abs)"]}}))
    local = project / ".claude" / "settings.local.json"
    local.parent.mkdir()
    local.write_text(json.dumps({"permissions": {"deny": ["Read(.env)", "Read(/private)"]}}))
    found = set(_targets(project))
    assert {str(tmp_path / "denied-abs"), str(isolated_state / "denied-home"),
            str(tmp_path / "by-rule"), str(isolated_state / "by-home-rule"),
            str(project / ".env"), str(project / "nested" / ".env"),
            str(project / "private")} <= found
    assert str(project) not in found and str(project / "nested") not in found


def test_writes_to_hidden_or_named_paths_are_never_committed(project: Path, isolated_state: Path):
    written = hide.never_written(config.load(project), str(project))
    # Named paths that do not exist yet: a command must not create them on the host.
    assert {str(isolated_state / ".aws"), str(isolated_state / ".netrc")} <= set(written)


def test_carving_around_an_engines_own_directory(tmp_path: Path):
    state = tmp_path / "state"
    for sub in ("projects", "sessions/mine/sandbox", "sessions/other"):
        (state / sub).mkdir(parents=True)
    (state / "trusted-projects.json").write_text("{}")
    carved = hide.carve([hide.Target(str(state), True)], str(state / "sessions/mine/sandbox"))
    assert {t.path for t in carved} == {str(state / "projects"), str(state / "sessions/other"),
                                        str(state / "trusted-projects.json")}


def test_the_claude_settings_read_are_the_clients(project: Path, monkeypatch):
    """hide sits below manager.claude and reads the same files itself: the same list."""
    from manager.claude import permissions

    assert (hide.MANAGED, hide.MANAGED_DROP_INS) == (permissions.MANAGED,
                                                     permissions.MANAGED_DROP_INS)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(project / "elsewhere"))
    files = [f for f, _ in hide.settings_files(str(project))]
    assert os.path.join(permissions.config_dir(), "settings.json") in files
    assert {str(project / ".claude/settings.json"),
            str(project / ".claude/settings.local.json")} <= set(files)


def test_the_overlay_holder_reads_the_files_hide_writes():
    """The holder is a program of its own (stdlib only, nothing of manager imported): its
    copies of the sandbox files' names and of the glob characters must be hide's."""
    from manager.engines.overlay.holder import hide as holder_hide
    from manager.engines.overlay.holder import project as holder_project

    assert holder_hide.HIDE_FILE == hide.HIDE_FILE
    assert holder_project.PATTERNS_FILE == hide.PATTERNS_FILE
    assert holder_project.GLOB_CHARS == hide.GLOB_CHARS


def test_the_checkpoint_store_is_always_hidden(tmp_path: Path):
    """Attack pass 10: the guard rails' snapshots hold the real work tree's hidden files (an
    untracked .env): the store is hidden wherever git would find it, with no git run: the
    repository's .git, a subdirectory's, a linked worktree's common directory."""
    from manager.guardrails import shadow

    assert shadow.STORE_NAME == hide.CHECKPOINT_STORE
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "sub").mkdir()
    store = str(repo / ".git" / shadow.STORE_NAME)
    assert hide.checkpoint_store(str(repo)) == [store]
    assert hide.checkpoint_store(str(repo / "sub")) == [store]
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-q", "--allow-empty", "-m", "base"], check=True)
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", str(tmp_path / "wt")],
                   check=True)
    assert hide.checkpoint_store(str(tmp_path / "wt")) == [store]
    assert hide.checkpoint_store(str(tmp_path)) == []
    assert store in hide.patterns(config.load(repo), str(repo))
