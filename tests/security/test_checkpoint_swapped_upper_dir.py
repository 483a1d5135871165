"""Attack pass 10: the guard rails' snapshot hashes a hidden host file through a directory of
the upper swapped for a symlink while it reads.

The UserPromptSubmit and Stop hooks take a snapshot of the sandbox's pending changes into the
checkpoint store (``.git/workspace-checkpoints.git``, visible inside the sandbox). The
change walk finds ``d/key`` (a regular file in the upper); ``_hashable`` then opens it by
its upper path, whose directories are followed as symlinks (``longpath.split``; only the
last component is ``O_NOFOLLOW``). A call still running (``run_in_background``) swaps ``d``
for a symlink to a hidden host directory between the walk and the hash, so git hashes the
host's ``key`` into the store, where the next sandboxed call reads it: a `hide`d file's
content inside the sandbox, and a host file in a checkpoint no review showed.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from manager.changes.model import Change
from manager.changes.model import EntryType
from manager.changes.model import Kind
from manager.guardrails import shadow
from tests.claude.conftest import Claude

FLIP = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs("d", exist_ok=True)
open("d/key", "w").write("decoy\n")
os.symlink(sys.argv[1], "d.lnk")
end = time.time() + float(sys.argv[2])
while time.time() < end:
    # RENAME_EXCHANGE: d is always there, a directory or the symlink
    libc.renameat2(-100, b"d", -100, b"d.lnk", 2)
"""


def _git(project: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=project,
                   check=True, capture_output=True)


def _blob_id(data: bytes) -> str:
    return subprocess.run(["git", "hash-object", "--stdin"], input=data, capture_output=True,
                          check=True).stdout.decode().strip()


def test_snapshot_hashes_no_hidden_host_file_through_a_swapped_directory(
        claude: Claude, project: Path, tmp_path: Path) -> None:
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "base")
    secret_dir = tmp_path / "secret"
    secret_dir.mkdir()
    canary = f"SECRET-CANARY-{os.getpid()}-{time.time_ns()}\n".encode()
    (secret_dir / "key").write_bytes(canary)
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "workspace" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"hide: [{secret_dir}]\n")
    claude.start()
    inside = claude.bash(f"cat {secret_dir}/key; true")
    assert canary.decode().strip() not in inside.stdout, "hide does not hold at all"

    oid = _blob_id(canary)
    store = project / ".git" / "workspace-checkpoints.git"
    answer = claude.pre_bash(f"python3 -c {shlex.quote(FLIP)} {secret_dir} 9",
                             run_in_background=True)
    flip = subprocess.Popen(["/bin/bash", "-c", answer.command], cwd=project, env=claude.env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    found = False
    try:
        time.sleep(1)
        deadline = time.time() + 6   # before the fix: found within 16 s, mostly far less
        while time.time() < deadline and not found:
            claude.hook("UserPromptSubmit", {"prompt": "go on"})
            found = (store / "objects" / oid[:2] / oid[2:]).exists()
    finally:
        flip.wait(timeout=60)
    if found:
        # and the sandbox reads it back: the hidden file's content inside
        obj = f".git/workspace-checkpoints.git/objects/{oid[:2]}/{oid[2:]}"
        read = claude.bash(f"python3 -c 'import zlib,sys;sys.stdout.write(zlib.decompress("
                           f"open(\"{obj}\",\"rb\").read()).decode(errors=\"replace\"))'")
        assert canary.decode().strip() not in read.stdout, (
            "a hidden host file was hashed into the checkpoint store through an upper "
            "directory swapped for a symlink, and a sandboxed call read it back: "
            + read.stdout[-200:])
    assert not found, "a hidden host file's content is in the checkpoint store"


def test_no_directory_on_the_way_to_an_upper_entry_is_followed(tmp_path: Path) -> None:
    """The class, without the race: whatever stands in the upper when the snapshot reads it,
    a symlink on the way is refused (fs/regular.py's ``*_below``), never followed to the
    host; a file over the snapshot limit (a sparse one costs the sandbox no block) is left out."""
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "key").write_text("SECRET\n")
    (secret / "link").symlink_to("/etc/passwd")
    upper = tmp_path / "upper"
    project = tmp_path / "proj"
    project.mkdir()
    inside = Path(f"{upper}{project}")
    inside.mkdir(parents=True)
    (inside / "d").symlink_to(secret)
    (inside / "big.bin").touch()
    os.truncate(inside / "big.bin", shadow.SNAPSHOT_FILE_LIMIT + 1)

    def change(name: str, kind: EntryType) -> Change:
        return Change(f"{project}/{name}", Kind.ADDED, f"{inside}/{name}", kind, None, True)

    key, link = change("d/key", EntryType.FILE), change("d/link", EntryType.SYMLINK)
    big = change("big.bin", EntryType.FILE)
    with pytest.raises(OSError):
        shadow._open_file(key, [shadow.SNAPSHOT_TOTAL_LIMIT])
    with pytest.raises(OSError):
        shadow.readlink_below(link.upper_root, link.upper_path)
    plan = shadow._plan(project, [key, big])
    assert plan.files == [] and plan.skipped == [big.real_path]
