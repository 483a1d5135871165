"""Rewind: put the work tree and the overlay's project view back to a checkpoint.

Two steps, because a checkpoint may hold both a real work tree and an overlay
view over it. First the real work tree: only the paths that differ are written
(from a scratch index, ``checkout-index``) or deleted, so the user's index keeps
its stat data for everything else. Then the view: the paths where the work tree
plus the overlay still differ from the checkpoint are written *inside* the
sandbox (a tar stream on stdin, ``rm -rf`` for deletions), through the engine,
so the overlay's upper layer is never edited behind a running sandbox's back.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from manager.engines.base import RunRequest
from manager.errors import WorkspaceError
from manager.git.plumbing import GITLINK
from manager.git.plumbing import SYMLINK
from manager.git.plumbing import DiffEntry
from manager.git.plumbing import Git
from manager.guardrails.shadow import Shadow
from manager.guardrails.target import Target
from manager.session import sandbox

# Exit status of a sandbox script that could not restore the view.
_ABORT = 97


def restore_worktree(shadow: Shadow, current: str, wanted: str) -> int:
    """Make the real work tree match tree ``wanted`` (it matches ``current`` now)."""
    entries = shadow.work().diff_trees(current, wanted, renames=False, numstat=False, trees=True)
    files = [e for e in entries if not e.is_tree and GITLINK not in (e.old_mode, e.new_mode)]
    root = shadow.repo.worktree
    for entry in files:
        if entry.status == "D":
            _unlink(root / os.fsdecode(entry.path))
    gone = [e for e in entries if e.is_tree and e.status == "D"]
    for entry in sorted(gone, key=lambda e: -e.path.count(b"/")):
        with contextlib.suppress(OSError):
            os.rmdir(root / os.fsdecode(entry.path))
    writes = [e.path for e in files if e.status != "D"]
    if writes:
        with shadow.scratch_index(seed=False) as index:
            git = shadow.work(index)
            git.read_tree(wanted)
            git.checkout_paths(writes)
    return len(files)


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def restore_view(target: Target, current: str, wanted: str) -> int:
    """Make the sandbox's view of the project match tree ``wanted`` (it shows ``current``)."""
    assert target.shadow is not None and target.session is not None
    shadow = target.shadow
    entries = shadow.work().diff_trees(current, wanted, renames=False, numstat=False, trees=True)
    entries = [e for e in entries if GITLINK not in (e.old_mode, e.new_mode)]
    if not entries:
        return 0
    deletions = [e.path for e in entries if e.status == "D" or e.status == "T"]
    writes = [e for e in entries if e.status != "D" and not e.is_tree]
    with tempfile.TemporaryFile() as stream:
        _write_tar(shadow.store(), writes, stream)
        stream.seek(0)
        script = _script(shadow.repo.worktree, deletions)
        status = _run_in_sandbox(target, script, stream)
    if status != 0:
        raise WorkspaceError(f"restoring the sandbox's view failed (exit {status}); "
                             "the work tree was restored",
                             hint="`workspace status` shows what the overlay holds")
    return len([e for e in entries if not e.is_tree])


def _script(root: Path, deletions: list[bytes]) -> str:
    quoted = " ".join(shlex.quote(os.fsdecode(p)) for p in deletions)
    removal = f"rm -rf -- {quoted}\n" if deletions else ""
    return (f"exec 1>&2\ncd -- {shlex.quote(str(root))} || exit {_ABORT}\n{removal}"
            f"tar -x --no-same-owner -p -f - || exit {_ABORT}\n")


def _write_tar(git: Git, entries: list[DiffEntry], out: IO[bytes]) -> None:
    """A tar of the blobs of ``entries`` (one ``cat-file --batch``), modes and links kept."""
    ids = "".join(f"{e.new_id}\n" for e in entries).encode()
    data = git.run("cat-file", "--batch", input=ids).stdout
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry, blob in zip(entries, _blobs(data), strict=True):
            _add_member(tar, entry, blob)


def _blobs(data: bytes) -> Iterator[bytes]:
    pos = 0
    while pos < len(data):
        header_end = data.index(b"\n", pos)
        size = int(data[pos:header_end].split(b" ")[2])
        start = header_end + 1
        yield data[start:start + size]
        pos = start + size + 1


def _add_member(tar: tarfile.TarFile, entry: DiffEntry, blob: bytes) -> None:
    import io

    info = tarfile.TarInfo(os.fsdecode(entry.path))
    if entry.new_mode == SYMLINK:
        info.type = tarfile.SYMTYPE
        info.linkname = os.fsdecode(blob)
        info.mtime = int(time.time())
        tar.addfile(info)
        return
    info.mtime = int(time.time())
    info.size = len(blob)
    info.mode = 0o755 if entry.new_mode == "100755" else 0o644
    tar.addfile(info, io.BytesIO(blob))


def _run_in_sandbox(target: Target, script: str, stdin: IO[bytes]) -> int:
    """Run ``script`` in the session's sandbox with ``stdin`` as its standard input."""
    assert target.session is not None
    cwd = str(target.shadow.repo.worktree) if target.shadow else "/"
    return sandbox.run(target.ctx, target.session, RunRequest(command=script, cwd=cwd, stdin=stdin))
