from __future__ import annotations

import pytest

from manager import config
from manager.claude import passthrough
from manager.claude import shell

DEFAULT = tuple(config.SCHEMA["passthrough"].default)   # the real default, not a copy
# Read-only commands the design once passed through; sandboxed unless the user lists them.
READ_ONLY = ("ls", "cat", "pwd", "grep", "rg", "find", "which", "env", "echo", "true",
             "false", "type", "command")
ALLOWED = list(DEFAULT) + list(READ_ONLY)


def is_own_script(script: shell.Script, plugin_root: str | None) -> bool:
    return passthrough.own_script(script, plugin_root) == "run"


@pytest.mark.parametrize("command", [
    "gh pr list && gh pr view 2", "gh pr list", "ls -la | grep x", "gh pr list 2>&1",
    "find . -name '*.py'", "command -v git", "env", "echo hi 2>/dev/null",
])
def test_passes(command: str) -> None:
    assert passthrough.passes(shell.parse(command), ALLOWED)


@pytest.mark.parametrize("command", [
    "ls && rm -rf x", "cat a > b", "echo $(rm x)", "git commit -m \"$(cat m)\"", "echo `id`",
    "find . -delete", "find . -exec rm {} +", "rg --pre cat x", "env rm x", "command rm x",
    "/tmp/evil/git status", "GIT_DIR=x git status", "(git status)", "cat <<EOF\nx\nEOF",
    "git status; make", "", "echo 'open", "git status", "git log 2>&1",
])
def test_sandboxed(command: str) -> None:
    assert not passthrough.passes(shell.parse(command), ALLOWED)


def test_read_only_commands_are_sandboxed_by_default() -> None:
    assert not passthrough.passes(shell.parse("cat f"), DEFAULT)
    assert passthrough.passes(shell.parse("docker ps"), DEFAULT)
    assert not passthrough.passes(shell.parse("git status"), ["git"])   # git never passes


def test_own_scripts() -> None:
    root = "/opt/plugin"
    assert is_own_script(shell.parse("/opt/plugin/bin/workspace status"), root)
    assert is_own_script(shell.parse("'/opt/plugin/bin/workspace' diff a"), root)
    for command in ("/opt/plugin/bin/workspace status && rm x", "/opt/plugin/bin/other",
                    "/opt/plugin/bin/workspace status > f", "X=1 /opt/plugin/bin/workspace s"):
        assert not is_own_script(shell.parse(command), root), command
    assert not is_own_script(shell.parse("/opt/plugin/bin/workspace status"), None)


# -- fail-open paths: each of these would run outside the sandbox if it passed ----------

@pytest.mark.parametrize("command", [
    # git configuration that runs programs, or points git at a repository the model wrote
    "git -c alias.x='!rm -rf /' x", "git -c core.pager='rm -rf ~' log", "git -c core.fsmonitor=x status",
    "git -C /tmp/evil status", "git --git-dir=/tmp/evil/.git status", "git --exec-path=/tmp log",
    "git -p log", "git --paginate log", "git --config-env=core.pager=X log",
    # git that writes the real working tree, index, refs, config or files
    "git commit -m x", "git add -A", "git checkout -- .", "git reset --hard", "git clean -fdx",
    "git stash", "git stash push", "git push", "git pull", "git fetch", "git merge x",
    "git config alias.x '!rm -rf ~'", "git config user.name x", "git config --unset user.name",
    "git branch new", "git branch -D old", "git tag v1", "git tag -d v1", "git remote add o u",
    "git worktree add ../x", "git reflog expire --all", "git diff --output=/tmp/x",
    "git log --output=x", "git grep -O vim x", "git grep --open-files-in-pager=sh x",
    "git ls-remote --upload-pack='touch /tmp/x' origin", "git difftool", "git x-alias",
    "git", "git -c", "git submodule update",
    # gh: aliases, extensions, config, and what writes into the real filesystem
    "gh alias set x '!rm -rf ~' --shell", "gh x", "gh extension install o/r", "gh ext exec x",
    "gh config set editor vim", "gh repo clone o/r", "gh pr checkout 1", "gh run download 1",
    "gh release download v1", "gh gist clone 1", "gh repo fork --clone", "gh -R o/r pr list",
    "gh codespace ssh",
    # docker/podman: the client reads or writes local files
    "docker build .", "docker compose up", "docker cp c:/etc/passwd .", "docker save -o x i",
    "docker run --env-file .env alpine", "docker -H tcp://x ps", "podman build .",
    "docker buildx build -o out .", "podman kube play x.yaml",
    # sudo in front of anything that would not pass by itself
    "sudo rm -rf /", "sudo -s", "sudo -i", "sudo -e /etc/hosts", "sudo sh -c 'rm x'",
    "sudo git commit -m x", "sudo FOO=1 git status", "sudo sudo git status", "sudo",
    "sudo -u root rm x",
    # prefixes and wrappers: only a bare listed name passes
    "command git status", "builtin git status", "exec git status", "env git status",
    "PATH=/tmp/evil git status", "GIT_PAGER='rm x' git log", "/usr/bin/git status",
    "./git status", "../bin/git status", "nohup git status", "time git status",
    # functions, aliases, compound syntax
    "git() { rm -rf ~; }; git status", "function git { rm x; }\ngit status",
    "shopt -s expand_aliases; alias git='rm -rf ~'\ngit status", "{ git status; }",
    "git status & rm x", "git status | sh", "git log | xargs rm",
])
def test_fail_open_paths_are_sandboxed(command: str) -> None:
    assert not passthrough.passes(shell.parse(command), DEFAULT), command


@pytest.mark.parametrize("command", [
    "gh pr list", "gh pr view 1", "gh api repos/o/r",
    "gh run view 1 --log", "gh --version", "gh auth status",
    "docker ps -a", "docker run --rm -it alpine true", "docker logs -f c", "podman images",
    "sudo docker ps", "sudo -n docker ps",
])
def test_safe_forms_pass(command: str) -> None:
    assert passthrough.passes(shell.parse(command), DEFAULT), command


@pytest.mark.parametrize(("command", "verdict"), [
    ("/opt/plugin/bin/workspace status", "run"),
    ("/opt/plugin/bin/workspace diff a", "run"),
    ("/opt/plugin/bin/workspace passthrough --status", "run"),
    ("/opt/plugin/bin/workspace --help", "run"),
    ("/opt/plugin/bin/workspace commit", "refuse"),
    ("/opt/plugin/bin/workspace discard", "refuse"),
    ("/opt/plugin/bin/workspace passthrough", "refuse"),
    ("/opt/plugin/bin/workspace hooks uninstall", "refuse"),
    ("/opt/plugin/bin/workspace run -- rm -rf ~", "refuse"),
    ("/opt/plugin/bin/workspace status && /opt/plugin/bin/workspace commit", "refuse"),
    ("/opt/plugin/bin/../bin/workspace status", None),           # sandboxed
    ("/opt/plugin/bin/workspace/../../../tmp/x status", None),
    ("$CLAUDE_PLUGIN_ROOT/bin/workspace commit", None),
    ("/opt/plugin/bin/workspace-hook PreToolUse", None),
])
def test_own_launcher_read_only_only(command: str, verdict: str | None) -> None:
    assert passthrough.own_script(shell.parse(command), "/opt/plugin") == verdict
