"""Attack pass 11: the overlay holder binds some real host entries into the sandbox's tree
read-only (not overlaid), and a call that is root of the namespace (the engine run by root,
or an ordinary user without subordinate ids) remounts that bind read-write and writes the
real host file: nothing held for review, nothing to discard.

Two routes, both in a snapshotted directory (a "level": a directory with mounts below it,
such as ``/``, ``/run``, ``/var``, a ``$HOME`` holding a FUSE mount):

* a regular file over ``SKELETON_FILE_LIMIT`` (1 MiB) is "bind": ``mount --bind REAL`` then
  ``remount,bind,ro`` (holder/build.py ``bind_files``);
* a directory that cannot be overlaid (its path holds ``,`` or ``:``, overlayfs's option
  syntax, or any other mount error) is ``readonly_bind``: ``mount --rbind REAL`` then
  ``remount,bind,ro``; the hidden paths below it keep only their masks (no mask layer: the
  real directory is the mount), so the same call also unmounts a mask and reads the secret.

The read-only flag was set inside the namespace, which the call's root owned, so the kernel
did not lock it: ``mount -o remount,rw,bind PATH`` undid it. Closed by the calls' views
(holder/views.py): a mount namespace copied into a user namespace nested in the holder's,
where the kernel locks every mount with its flags. Rule broken: nothing an
agent's commands do reaches the real system until the user commits (promise 1); hidden
paths' content is never readable inside (promise 3, masklayer's "below the masks there is
nothing either").

Reproduced here by hand (root, and wstest with newuidmap/newgidmap off PATH), in a private
mount namespace with a tmpfs at ``LVL/m`` so that ``LVL`` is a level:
``workspace run -- sh -c 'mount -o remount,rw,bind LVL/big.txt; echo ESCAPED | dd
of=LVL/big.txt conv=notrunc'`` wrote the real file; the same for ``LVL/d:x`` (a
directory), and ``umount LVL/d:x/secret; cat LVL/d:x/secret`` read the hidden file.

The level is made in a private mount namespace of the test's own (``unshare -m``), so the
host's mount table is never touched.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.engines import accounts
from tests.engines.test_overlay_user import _path_without

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]

BIG = 2 << 20   # over SKELETON_FILE_LIMIT: bound, not copied

ATTACK = r"""
lvl=$1
mount -o remount,rw,bind "$lvl/big.txt" 2>/dev/null
printf ESCAPED-BIG | dd of="$lvl/big.txt" conv=notrunc 2>/dev/null
mount -o remount,rw,bind "$lvl/d:x" 2>/dev/null
printf ESCAPED-DIR > "$lvl/d:x/f" 2>/dev/null
umount "$lvl/d:x/secret" 2>/dev/null
cat "$lvl/d:x/secret" 2>/dev/null
echo done
"""


def _level(account: accounts.Account) -> Path:
    lvl = account.base / "lvl"
    (lvl / "m").mkdir(parents=True)
    big = lvl / "big.txt"
    big.write_text("ORIGINAL")
    os.truncate(big, BIG)
    odd = lvl / "d:x"
    odd.mkdir()
    (odd / "f").write_text("ORIGINAL")
    (odd / "secret").write_text("TOPSECRET-A11\n")
    account.chown(lvl, lvl / "m", big, odd, odd / "f", odd / "secret")
    config = account.base / "config" / "workspace"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.yaml").write_text(f'hide: ["{odd / "secret"}"]\n')
    account.chown(config, config / "config.yaml")
    return lvl


def _outer(lvl: Path) -> list[str]:
    """A private mount namespace in which ``lvl`` has a mount below it (a level)."""
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            'mount -t tmpfs ws-a11 "$0" && exec "$@"', str(lvl / "m")]


@pytest.mark.parametrize("kind", ["self", "ordinary"])
def test_a_root_call_cannot_write_through_a_real_bind(kind: str, tmp_path: Path) -> None:
    """Root of the namespace: root's own sessions, and an ordinary user's without
    subordinate ids (a single mapping)."""
    account = accounts.make(kind, tmp_path)
    try:
        lvl = _level(account)
        env = {"PATH": _path_without(account, "newuidmap", "newgidmap")} if kind == "ordinary" else {}
        proc = account.ws("run", "--", "sh", "-c", ATTACK, "sh", str(lvl), env=env,
                          outer=_outer(lvl))
        assert "done" in proc.stdout, proc
        reached = []
        if (lvl / "big.txt").read_bytes()[:8] != b"ORIGINAL":
            reached.append("wrote the real >1 MiB file through its remounted bind")
        if (lvl / "d:x" / "f").read_text() != "ORIGINAL":
            reached.append("wrote the real directory that could not be overlaid")
        if "TOPSECRET" in proc.stdout:
            reached.append("read a hidden file below a directory that could not be overlaid")
        assert not reached, f"a sandboxed call {'; '.join(reached)}"
    finally:
        accounts.clean(account)
