"""The overlay holder's part of ``hide`` (:mod:`manager.hide`): mounts over each hidden path.

Stdlib only: the holder runs it with ``-I`` from its own directory. Read before the pivot
from the sandbox's ``hide.list`` ("d PATH" / "f PATH" each ended by a NUL, real host paths). Inside the
sandbox's root a directory gets an empty read-only tmpfs over it, anything else a bind of an
empty read-only file: a command sees the path empty, never its content, and cannot write
there either (nothing reaches the host, nothing waits for review). The mounts are the
namespace root's: a call, which runs as the user (subordinate ids), cannot unmount or
remount them; a call that is root in the namespace (the holder run by root, or an ordinary
user without subordinate ids) can, and finds an empty placeholder below
(holder/masklayer.py: the build leaves the hidden paths' content out of the tree).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

HIDE_FILE = "hide.list"      # manager.hide.HIDE_FILE
EMPTY_FILE = "hidden.empty"  # in the sandbox: what a hidden file shows


def read_list(sandbox: Path) -> list[tuple[str, bool]]:
    """(real path, is a directory) for each line of the sandbox's list; none without one."""
    try:
        text = os.fsdecode((sandbox / HIDE_FILE).read_bytes())   # names need not be UTF-8
    except FileNotFoundError:
        return []
    # NUL-ended records (manager.hide.write_list): never split at a line break of a path.
    return [(line[2:], line[0] == "d") for line in text.split("\0") if line[1:2] == " "]


def apply(root: Path, sandbox: Path, listed: list[tuple[str, bool]], log: list[str]) -> None:
    """Mount over every ``listed`` path (:func:`read_list`) below ``root``. A path that
    cannot be hidden stops the holder."""
    empty = sandbox / EMPTY_FILE
    if any(not is_dir for _, is_dir in listed):
        empty.unlink(missing_ok=True)
        empty.touch(mode=0o444)
    for path, is_dir in listed:
        target = str(root) + path
        if not os.path.lexists(target):
            continue   # gone since the list was made
        error = _hide_dir(target) if is_dir and os.path.isdir(target) else _hide_file(target, empty)
        if error is not None:
            raise RuntimeError(f"cannot hide {path}: {error}")
    if listed:
        log.append(f"hidden: {len(listed)} path(s) (see {HIDE_FILE})")


def _hide_dir(target: str) -> str | None:
    return _mount("-t", "tmpfs", "-o", "ro,nosuid,nodev,noexec,size=4k,nr_inodes=1,mode=0555",
                  "tmpfs", target)


def _hide_file(target: str, empty: Path) -> str | None:
    if os.path.isdir(target):   # a directory now, a file when listed: still empty
        return _hide_dir(target)
    error = _mount("--bind", str(empty), target)
    if error is None:
        error = _mount("-o", "remount,bind,ro,nosuid,nodev,noexec", target)
    return error


def _mount(*args: str) -> str | None:
    proc = subprocess.run(["mount", *args], capture_output=True, text=True)
    return None if proc.returncode == 0 else (proc.stderr.strip() or f"mount exited {proc.returncode}")


def hidden_name(hidden: frozenset[str], level: str, name: str) -> bool:
    """Whether a level's entry is hidden: a refresh keeps its mount and never shows it."""
    return os.path.join(level, name) in hidden
