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


PATTERNS = ["*.log", "build", "src/*.py", "src/**/*.py", "secret/**", "/etc/**", "/home/u/.ssh",
            "f[0-9]", "dir/", "/home/u/proj/new/sub/k*", "/home/u/proj/newer", "~/.aws"]
PATHS = ["/home/u/proj/new/sub/key", "/home/u/proj/new/sub/x", "/home/u/proj/newer/a",
         "/home/u/proj/src/deep/a.py", "/home/u/proj/a/b/x.log", "/home/u/proj/a/build/o",
         "/home/u/proj/secret/k", "/home/u/proj/d/f7", "/etc/ssl/certs/a", "/home/u/.ssh/k/id",
         "/home/u/proj/dir/x/y", "/home/u/.aws/config", "/home/u/other/new/sub/key"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_reaches_is_never_wrong_when_it_says_no(pattern: str) -> None:
    """A tree none of whose entries a pattern can match is told apart without reading them:
    whenever a pattern matches a path, it reaches every ancestor of that path."""
    excluded = compile_patterns([pattern], P)
    for path in PATHS:
        if excluded._matches(path):
            for root in Path(path).parents:
                assert excluded.reaches(str(root)), (pattern, path, root)


def test_reaches_tells_unrelated_trees_apart() -> None:
    excluded = compile_patterns(["/home/u/proj/new/sub/k*", "/home/u/.ssh", "src/*.py"], P)
    assert excluded.reaches("/home/u/proj/new")
    assert excluded.reaches("/home/u/proj/new/sub")
    assert not excluded.reaches("/home/u/proj/newer")
    assert not excluded.reaches("/home/u/proj/other")
    assert excluded.reaches("/home/u/proj/src")
    assert not excluded.reaches("/tmp/x")
    assert compile_patterns(["*.key"], P).reaches("/home/u/proj/any/where")
    assert not compile_patterns([], P).reaches("/home/u/proj/any")
