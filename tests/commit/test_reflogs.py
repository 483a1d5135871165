"""Reflogs after a commit are the sandbox's, with the user's own later entries kept."""

from __future__ import annotations

from manager.commit.reflogs import OURS
from manager.commit.reflogs import merge

SINCE = 1_000


def entry(when: int, message: str, old: str = "1", new: str = "2") -> bytes:
    return f"{old * 40} {new * 40} Ada <ada@example.com> {when} +0000\t{message}".encode()


BEFORE = [entry(10, "clone: from /r"), entry(20, "commit: one")]


def test_the_sandboxs_entries_follow_the_real_ones() -> None:
    added = [entry(1_100, "checkout: moving from main to f"), entry(1_101, "commit: two")]
    assert merge(BEFORE, BEFORE + added, SINCE) == BEFORE + added
    assert merge(BEFORE + added, BEFORE + added, SINCE) == BEFORE + added   # again: the same


def test_the_users_entries_made_meanwhile_are_kept_and_ours_dropped() -> None:
    users = entry(1_050, "commit: the user's")
    ours = entry(1_200, OURS)
    sandbox = [entry(1_100, "commit: the agent's")]
    assert merge(BEFORE + [users, ours], BEFORE + sandbox, SINCE) == BEFORE + [users] + sandbox


def test_entries_the_sandbox_removed_go() -> None:
    """``git stash pop`` rewrites the stash's log without its newest entry."""
    assert merge(BEFORE, BEFORE[:1], SINCE) == BEFORE[:1]
