"""The git that the hooks and the CLI run on the real repository never runs a program
that git configuration names.

The agent can reach git configuration (the repository's ``.git/config``, its hooks and
attributes, the user's ``~/.gitconfig``) by more than one road; git itself runs in the
sandbox, but SessionStart, UserPromptSubmit, Stop and the CLI (checkpoint, budget,
status, diff, commit) run git on the host. Each case plants one program-running key,
in the repository's config and in the global one, pointing at a script that leaves a
marker on the real disk; every host path that runs git must leave no marker.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.claude.conftest import Claude

pytestmark = pytest.mark.engine

HOOKS = ("pre-commit", "post-commit", "reference-transaction", "post-index-change",
         "post-checkout", "post-merge", "pre-auto-gc", "post-rewrite", "pre-push",
         "fsmonitor-watchman", "push-to-checkout", "commit-msg", "prepare-commit-msg")

# key -> value ({cmd}: a shell command leaving the marker; {hooks}: a hooks directory
# holding every hook; {include}: a config file that sets core.fsmonitor to {cmd}).
CASES = {
    "core.fsmonitor": "{cmd}; false",
    "core.hooksPath": "{hooks}",
    "filter.evil.clean": "{cmd}",
    "filter.evil.smudge": "{cmd}",
    "filter.evil.process": "{cmd}",
    "diff.evil.textconv": "{cmd}",
    "diff.evil.command": "{cmd}",
    "diff.external": "{cmd}",
    "merge.evil.driver": "{cmd}",
    "gpg.program": "{cmd}",
    "gpg.ssh.program": "{cmd}",
    "core.pager": "{cmd}",
    "pager.log": "{cmd}",
    "core.editor": "{cmd}",
    "sequence.editor": "{cmd}",
    "core.askPass": "{cmd}",
    "credential.helper": "!{cmd}",
    "core.sshCommand": "{cmd}",
    "remote.origin.uploadpack": "{cmd}",
    "remote.origin.receivepack": "{cmd}",
    "include.path": "{include}",
    "includeIf.gitdir:/.path": "{include}",
    "filter.a=b.clean": "{cmd}",
    # Not a program, but a file git writes wherever the (global) config says: an event
    # line holds config values, e.g. an alias's "$(...)", and a ~/.bashrc target sources it.
    "trace2.eventTarget": "{marker}",
    "trace2.normalTarget": "{marker}",
    "trace2.perfTarget": "{marker}",
}
# What makes a key take effect: the attributes that select the drivers, signing on.
COMPANIONS = {"gpg.program": [("commit.gpgSign", "true")],
              "gpg.ssh.program": [("commit.gpgSign", "true"), ("gpg.format", "ssh")],
              "remote.origin.uploadpack": [("remote.origin.url", "/nonexistent")],
              "remote.origin.receivepack": [("remote.origin.url", "/nonexistent")]}
ATTRIBUTES = "* filter=evil diff=evil merge=evil\n*.md filter=a=b\n"


def _plant(repo: Path, tmp: Path, key: str, home: Path) -> Path:
    marker = tmp / "host-marker"
    script = tmp / "mark.sh"
    script.write_text(f"#!/bin/sh\necho \"$0 $*\" >> {marker}\n")   # reads no input: a
    # process filter waiting for its handshake would hang the sandbox's git
    script.chmod(0o755)
    cmd = f"{script} {key}"
    hooks = tmp / "evil-hooks"
    hooks.mkdir(exist_ok=True)
    for name in HOOKS:
        for where in (hooks, repo / ".git" / "hooks"):
            (where / name).write_text(f"#!/bin/sh\n{cmd} {name}\n")
            (where / name).chmod(0o755)
    include = tmp / "included.gitconfig"
    include.write_text(f"[core]\n\tfsmonitor = {cmd}; false\n[filter \"evil\"]\n\tclean = {cmd}\n")
    value = CASES[key].format(cmd=cmd, hooks=hooks, include=include, marker=marker)
    for config in (repo / ".git" / "config", home / ".gitconfig"):
        for name, setting in [(key, value), *COMPANIONS.get(key, [])]:
            subprocess.run(["git", "config", "-f", str(config), name, setting], check=True)
    (repo / ".gitattributes").write_text(ATTRIBUTES)
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text(ATTRIBUTES)
    return marker


def _cli(claude: Claude, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "manager", *args], cwd=claude.project,
                          capture_output=True, text=True, env=claude.env, timeout=120)


@pytest.mark.parametrize("key", sorted(CASES))
def test_host_git_runs_no_program_the_config_names(claude: Claude, repo: Path, tmp_path: Path,
                                                   key: str) -> None:
    (repo / ".workspace.yaml").write_text("budget:\n  limit: 5\n")
    marker = _plant(repo, tmp_path, key, Path(claude.env["HOME"]))
    assert claude.start().returncode == 0
    (repo / "a.txt").write_text("changed on the host\n")
    (repo / "notes.md").write_text("new\n")
    assert claude.hook("UserPromptSubmit", {"prompt": "go"}).returncode == 0
    # Git in the sandbox runs what the config says, there (its marker stays in the
    # sandbox: only the project is committed).
    g = "git -c filter.evil.process= -c user.name=T -c user.email=t@e -c commit.gpgSign=false"
    run = claude.bash(f"printf 'x\\ny\\nz\\n' > s.txt; {g} add s.txt; {g} commit -q --no-verify -m s")
    assert run.returncode == 0, run
    stop = claude.hook("Stop", {"stop_hook_active": False})
    assert stop.returncode == 0, stop.stderr
    assert stop.json.get("decision") == "block", stop.json       # the budget was counted
    for args in (("budget", "--json"), ("checkpoint", "-m", "c"), ("status",),
                 ("diff", "--no-pager"), ("commit", "--force", "--json", str(repo))):
        run = _cli(claude, *args)
        assert run.returncode == 0, (args, run.stderr)
    assert (repo / "s.txt").read_text() == "x\ny\nz\n"
    log = subprocess.run(["git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null",
                          "log", "--no-show-signature", "--format=%s", "-1"], cwd=repo,
                         capture_output=True, text=True,
                         env={**claude.env, "GIT_CONFIG_GLOBAL": "/dev/null"})
    assert log.stdout.strip() == "s", log.stderr        # the sandbox's commit was applied
    assert claude.hook("Stop", {"stop_hook_active": False}).returncode == 0
    assert not marker.exists(), f"git on the host ran a configured program: {marker.read_text()}"
