from __future__ import annotations

import pytest

from manager.claude import passthrough
from manager.claude import shell

ALLOWED = list(passthrough.DEFAULT) + list(passthrough.READ_ONLY)


@pytest.mark.parametrize("command", [
    "git status", "git status && git diff", "gh pr list", "ls -la | grep x", "git log 2>&1",
    "find . -name '*.py'", "command -v git", "env", "echo hi 2>/dev/null",
])
def test_passes(command: str) -> None:
    assert passthrough.passes(shell.parse(command), ALLOWED)


@pytest.mark.parametrize("command", [
    "ls && rm -rf x", "cat a > b", "echo $(rm x)", "git commit -m \"$(cat m)\"", "echo `id`",
    "find . -delete", "find . -exec rm {} +", "rg --pre cat x", "env rm x", "command rm x",
    "/tmp/evil/git status", "GIT_DIR=x git status", "(git status)", "cat <<EOF\nx\nEOF",
    "git status; make", "", "echo 'open",
])
def test_sandboxed(command: str) -> None:
    assert not passthrough.passes(shell.parse(command), ALLOWED)


def test_read_only_commands_are_sandboxed_by_default() -> None:
    assert not passthrough.passes(shell.parse("cat f"), passthrough.DEFAULT)
    assert passthrough.passes(shell.parse("git status"), passthrough.DEFAULT)


def test_own_scripts() -> None:
    root = "/opt/plugin"
    assert passthrough.is_own_script(shell.parse("/opt/plugin/bin/workspace status"), root)
    assert passthrough.is_own_script(shell.parse("'/opt/plugin/bin/workspace' diff a"), root)
    for command in ("/opt/plugin/bin/workspace status && rm x", "/opt/plugin/bin/other",
                    "/opt/plugin/bin/workspace status > f", "X=1 /opt/plugin/bin/workspace s"):
        assert not passthrough.is_own_script(shell.parse(command), root), command
    assert not passthrough.is_own_script(shell.parse("/opt/plugin/bin/workspace status"), None)
