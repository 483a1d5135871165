"""Helpers for tests on real git repositories."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

Git = Callable[..., str]


def make_git(root: Path) -> Git:
    def git(*args: str, input: str | None = None, check: bool = True) -> str:
        proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                              input=input)
        if check and proc.returncode != 0:
            raise AssertionError(f"git {' '.join(args)}: {proc.stderr}")
        return proc.stdout

    return git


def init_repo(root: Path) -> Git:
    root.mkdir(exist_ok=True)
    git = make_git(root)
    git("init", "-q", "-b", "main")
    git("config", "user.name", "Test User")
    git("config", "user.email", "test@example.com")
    return git


def user_view(root: Path) -> dict[str, object]:
    """Everything the user's git shows: index bytes first (status may refresh it)."""
    index = (root / ".git" / "index").read_bytes() if (root / ".git" / "index").exists() else b""
    git = make_git(root)
    return {
        "index": index,
        "status": git("--no-optional-locks", "status", "--porcelain=v2"),
        "staged": git("diff", "--cached", "--name-status"),
        "refs": git("for-each-ref"),
        "branches": git("branch", "-a"),
        "stash": git("stash", "list"),
        "log": git("log", "--all", "--oneline"),
        "reflog_head": git("reflog", "-n", "5"),
    }
