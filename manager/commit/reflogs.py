"""Reflogs after a commit: the entries the sandbox's git wrote, kept as git wrote them.

``update-ref`` would log each applied ref as one entry with our message; natively each
``git commit``, ``checkout`` or ``rebase`` logged its own ("commit: fix", "checkout: moving
from main to feature"), with its identity and time, in the ref's log and HEAD's. So once
the refs are applied, every log the sandbox changed is made the sandbox's, for a ref that
now has the sandbox's value (HEAD too, when it names the same thing). Entries the user's
own git added meanwhile (dated after the session started, absent from the sandbox's log)
are kept; our own ``update-ref`` entries go. Running it again changes nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from manager.changes.model import is_whiteout
from manager.fs.util import write_atomic
from manager.git import view as gitview

OURS = "workspace: commit"        # the message of our own update-ref entries
ZERO = "0" * 40


def sync(git_dir: Path, upper_git: Path, since: float) -> None:
    """Give every applied ref (and HEAD) the log the sandbox wrote for it."""
    upper_logs = upper_git / "logs"
    if not upper_logs.is_dir():
        return
    real = gitview.sandbox_refs(git_dir, None)
    sandbox = gitview.sandbox_refs(git_dir, upper_git)
    for name in _log_names(upper_logs, ""):
        if _as_in_sandbox(name, git_dir, upper_git, real, sandbox):
            _merge_into(git_dir / "logs" / name, upper_logs / name, since)


def object_ids(git_dir: Path, upper_git: Path) -> set[str]:
    """The objects the entries the sandbox added to its logs name: natively they exist
    (gc keeps them, fsck checks them)."""
    found: set[str] = set()
    upper_logs = upper_git / "logs"
    for name in _log_names(upper_logs, "") if upper_logs.is_dir() else ():
        real = set(_lines(git_dir / "logs" / name))
        for line in _lines(upper_logs / name):
            if line not in real:
                found.update(f.decode() for f in line.split(b" ", 2)[:2] if len(f) == 40)
    found.discard(ZERO)
    return found


def _log_names(directory: Path, prefix: str) -> Iterator[str]:
    for entry in os.scandir(directory):
        name = f"{prefix}{entry.name}"
        if entry.is_dir(follow_symlinks=False):
            yield from _log_names(Path(entry.path), name + "/")
        elif entry.is_file(follow_symlinks=False) and not entry.name.endswith(".lock") \
                and not is_whiteout(Path(entry.path), entry.stat(follow_symlinks=False)):
            yield name


def _as_in_sandbox(name: str, git_dir: Path, upper_git: Path, real: dict[str, str],
                   sandbox: dict[str, str]) -> bool:
    if name != "HEAD":
        return real.get(name) is not None and real.get(name) == sandbox.get(name)
    upper_head = upper_git / "HEAD"
    head = _head(upper_head) if upper_head.is_file() else _head(git_dir / "HEAD")
    if head is None or head != _head(git_dir / "HEAD"):
        return False
    target = gitview.symbolic_target(head)
    return target is None or real.get(target) == sandbox.get(target)


def _head(path: Path) -> str | None:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return None
    return gitview.SYMBOLIC + text[4:].strip() if text.startswith("ref:") else text


def _lines(path: Path) -> list[bytes]:
    try:
        return path.read_bytes().splitlines()
    except OSError:
        return []


def _merge_into(real_path: Path, upper_path: Path, since: float) -> None:
    real = _lines(real_path)
    merged = merge(real, _lines(upper_path), since)
    if merged != real:
        real_path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(real_path, b"".join(line + b"\n" for line in merged))


def merge(real: list[bytes], sandbox: list[bytes], since: float) -> list[bytes]:
    """The sandbox's log, with the entries the user's git added since ``since`` kept."""
    shared = 0
    while shared < min(len(real), len(sandbox)) and real[shared] == sandbox[shared]:
        shared += 1
    real_rest, sandbox_rest = real[shared:], sandbox[shared:]
    in_sandbox, in_real = set(sandbox_rest), set(real_rest)
    kept = [line for line in real_rest
            if line in in_sandbox or (_when(line) >= since and not _ours(line))]
    return real[:shared] + kept + [line for line in sandbox_rest if line not in in_real]


def _when(line: bytes) -> float:
    """An entry's time: "OLD NEW Name <email> SECONDS ZONE<tab>message"."""
    try:
        return float(line.partition(b"\t")[0].rsplit(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0.0


def _ours(line: bytes) -> bool:
    return line.partition(b"\t")[2] == OURS.encode()
