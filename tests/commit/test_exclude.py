"""Exclude patterns: absolute, project-relative, any-depth names, ``**``, directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from manager.commit.exclude import compile_patterns

P = Path("/home/u/proj")


@pytest.mark.parametrize(("pattern", "path", "hit"), [
    ("*.log", "/home/u/proj/a/b/x.log", True),
    ("*.log", "/home/u/proj/x.logs", False),
    ("build", "/home/u/proj/sub/build/out.o", True),
    ("src/*.py", "/home/u/proj/src/a.py", True),
    ("src/*.py", "/home/u/proj/src/deep/a.py", False),
    ("src/**/*.py", "/home/u/proj/src/deep/er/a.py", True),
    ("src/**/*.py", "/home/u/proj/src/a.py", True),
    ("secret/**", "/home/u/proj/secret/k", True),
    ("/etc/**", "/etc/hosts", True),
    ("/etc/**", "/home/u/proj/etc/hosts", False),
    ("*.log", "/var/log/x.log", False),
    ("/home/u/.ssh", "/home/u/.ssh/id_rsa", True),
    ("f[0-9]", "/home/u/proj/f7", True),
    ("f[!0-9]", "/home/u/proj/f7", False),
    ("dir/", "/home/u/proj/dir/x", True),
])
def test_patterns(pattern: str, path: str, hit: bool) -> None:
    assert compile_patterns([pattern], P)(Path(path)) is hit


def test_home_relative(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/u")
    assert compile_patterns(["~/.cache/**"], P)(Path("/home/u/.cache/pip/x"))
