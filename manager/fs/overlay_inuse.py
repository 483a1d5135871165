"""Whether a live overlay still uses an upper directory, after its engine stopped.

Stopping the engine unmounts the sandbox, but an overlay lives on while anything holds a
descriptor of it (a file, a directory, a socket's message in flight), and a call can hand one
to a process outside its session (an abstract unix socket on the host's network, the user's
D-Bus: attack pass 15). Such a process writes the upper directory whenever it likes; worse,
once commit renames an upper entry into the real tree (same filesystem), the overlay's
dentry *is* the real entry: a write through the old descriptor lands in the real file. So
commit applies nothing while an overlay still uses an upper directory.

The kernel marks each directory an overlay uses as its upper ("in use"); a second overlay
asked for ``index=on`` over an upper in use fails with EBUSY, before it writes anything. The
probe does that in a namespace of its own (a user namespace when not root) with a work
directory on a tmpfs, which overlay refuses (EINVAL: "workdir and upperdir must reside under
the same mount") right after the in-use check: a free upper is never written. A kernel that
refused the options themselves would say EINVAL too, so the probe first proves itself on an
upper it keeps in use (a scratch overlay beside the sandbox's): EBUSY there, or it cannot tell.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import tempfile
import time
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
SETTLE_SECONDS = 2.0   # the sandbox's own processes (its init, views) die after its holder


def still_used(uppers: list[Path], beside: Path, works: list[Path] | None = None) -> list[Path] | None:
    """Those of ``uppers`` (upper directories) and ``works`` (work directories) a live overlay
    uses, looked at again for a moment while any is (a stopped sandbox's last processes are
    going); None when this host cannot tell. ``beside``: a directory on their file system
    for the probe's own overlays."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        found = _probe([u for u in uppers if _plain_dir(u)],
                       [w for w in works or [] if _plain_dir(w)], beside)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def _plain_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _probe(uppers: list[Path], works: list[Path], beside: Path) -> list[Path] | None:
    if not uppers and not works:
        return []
    own = Path(tempfile.mkdtemp(prefix=".inuse-", dir=beside))
    try:
        for name in ("upper", "work", *(f"u{i}" for i in range(len(works) + 1))):
            (own / name).mkdir()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read)
                os.write(write, _in_child(uppers, works, own).encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as f:
            said = f.read().decode()
        os.waitpid(pid, 0)
    finally:
        _remove(own)
    if not said.startswith("ok"):
        return None
    both = [*uppers, *works]
    return [both[int(i)] for i in said.split()[1:]]


def _in_child(uppers: list[Path], works: list[Path], own: Path) -> str:
    """"ok I J ...": the indexes (uppers, then works) of those in use; anything else: cannot
    tell. It proves itself first on an upper and a work directory it holds in use."""
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(CLONE_NEWNS if uid == 0 else CLONE_NEWUSER | CLONE_NEWNS) != 0:
        return "unshare"
    if uid != 0:
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"),
                           ("gid_map", f"0 {gid} 1")):
            with open(f"/proc/self/{name}", "w", encoding="ascii") as f:
                f.write(text)
    scratch = tempfile.mkdtemp(prefix="ws-inuse-")
    try:
        if libc.mount(b"none", scratch.encode(), b"tmpfs", 0, None) != 0:
            return "tmpfs"
        for name in ("lower", "work", "mnt", "held"):
            os.mkdir(f"{scratch}/{name}")
        held = f"lowerdir={scratch}/lower,upperdir={own}/upper,workdir={own}/work,userxattr"
        if libc.mount(b"overlay", f"{scratch}/held".encode(), b"overlay", 0, held.encode()) != 0:
            return "no overlay"
        proof = [_upper_in_use(libc, scratch, own / "upper"),
                 _work_in_use(libc, scratch, own / f"u{len(works)}", own / "work")]
        if proof != [True, True]:   # its own, in use: the probe cannot tell here
            return "unproven"
        said = [*(_upper_in_use(libc, scratch, u) for u in uppers),
                *(_work_in_use(libc, scratch, own / f"u{i}", w) for i, w in enumerate(works))]
        # One this probe cannot read (an odd error, though the probe proved itself) counts
        # as used: what the sandbox made must not blind it.
        return " ".join(["ok", *(str(i) for i, used in enumerate(said) if used is not False)])
    finally:
        libc.umount2(f"{scratch}/held".encode(), 2)   # MNT_DETACH
        libc.umount2(scratch.encode(), 2)
        os.rmdir(scratch)


def _escaped(path: Path) -> str:
    """By name, escaped as overlay reads its options (it refuses a /proc/self/fd link here)."""
    return str(path).replace("\\", "\\\\").replace(",", "\\,").replace(":", "\\:")


def _upper_in_use(libc: ctypes.CDLL, scratch: str, upper: Path) -> bool | None:
    """With its work directory on the probe's tmpfs: EBUSY (in use) or EINVAL (not on the
    upper's mount: free), before anything is written."""
    options = (f"lowerdir={scratch}/lower,upperdir={_escaped(upper)},workdir={scratch}/work,"
               "userxattr,index=on")
    if libc.mount(b"overlay", f"{scratch}/mnt".encode(), b"overlay", 0, options.encode()) == 0:
        libc.umount2(f"{scratch}/mnt".encode(), 2)
        return None   # not the refusal it should be: this kernel cannot tell
    failed = ctypes.get_errno()
    return True if failed == errno.EBUSY else False if failed == errno.EINVAL else None


def _work_in_use(libc: ctypes.CDLL, scratch: str, upper: Path, work: Path) -> bool | None:
    """Over a fresh upper of the probe's beside it: EBUSY (in use), or it mounts (free; the
    work directory gets overlay's scratch entries, and the mount goes at once). Every
    overlay the holder mounts has a work directory of its own, so each live one holds its
    mark (an upper's belongs to the first overlay over it only: attack pass 19)."""
    options = (f"lowerdir={scratch}/lower,upperdir={_escaped(upper)},workdir={_escaped(work)},"
               "userxattr,index=on")
    _remove(work / "index")   # an earlier probe's (the holder never asks for one): it would
    #                           name that probe's upper, gone (ESTALE)
    if libc.mount(b"overlay", f"{scratch}/mnt".encode(), b"overlay", 0, options.encode()) == 0:
        libc.umount2(f"{scratch}/mnt".encode(), 2)
        _remove(work / "index")
        return False
    return True if ctypes.get_errno() == errno.EBUSY else None


def _remove(own: Path) -> None:
    """The probe's own overlay directories (overlay leaves its work dir mode 0000)."""
    for path in sorted(own.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o700)
                path.rmdir()
            else:
                path.unlink()
    with contextlib.suppress(OSError):
        own.rmdir()
