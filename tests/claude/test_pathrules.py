"""Path specifiers of Read/Edit rules (gitignore style, Claude Code's four anchors)."""

from __future__ import annotations

import os

import pytest

from manager.claude import pathrules

PROJECT = "/proj"
CWD = "/proj/sub"


@pytest.mark.parametrize(("pattern", "path", "matches"), [
    (None, "/anything", True),
    ("//etc/secret", "/etc/secret", True),
    ("//etc/secret", "/etc/secret/inner/file", True),       # a directory covers its contents
    ("//etc/secret", "/etc/secrets", False),
    ("//etc/**", "/etc/a/b/c", True),
    ("//etc/*.conf", "/etc/a.conf", True),
    ("//etc/*.conf", "/etc/x/a.conf", False),                # * stays in one component
    ("//etc/**/*.conf", "/etc/x/y/a.conf", True),
    ("//etc/**/*.conf", "/etc/a.conf", True),
    ("~/.ssh/**", "HOME/.ssh/id_rsa", True),
    ("/config/*.json", "/proj/config/a.json", True),         # / is the project root
    ("/config/*.json", "/config/a.json", False),
    (".env", "/proj/sub/.env", True),                         # no slash: any depth below cwd
    (".env", "/proj/sub/deep/.env", True),
    (".env", "/proj/.env", False),                            # above the cwd
    ("*.env", "/proj/sub/x/prod.env", True),
    ("./secrets/**", "/proj/sub/secrets/a", True),
    ("secrets/a", "/proj/sub/x/secrets/a", False),           # a slash anchors it to the cwd
    ("src/**/*.ts", "/proj/sub/src/a/b.ts", True),
    ("f?le", "/proj/sub/file", True),
    ("f?le", "/proj/sub/f/le", False),
])
def test_matches(pattern: str | None, path: str, matches: bool) -> None:
    path = path.replace("HOME", os.path.expanduser("~"), 1) if path.startswith("HOME") else path
    assert pathrules.matches(pattern, path, PROJECT, CWD) is matches
