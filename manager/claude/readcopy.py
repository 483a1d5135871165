"""What Read is handed when it reads the sandbox's version of a file: a private copy.

The file the hook judged lies in an upper directory, which the sandbox's processes keep
writing. Between the hook's answer and the client's open, one of them could swap a
component of that path for a symlink to a file no rule was asked about, and the client,
on the host, would follow it. So the client reads a copy taken here, opened without
following any symlink below the upper directory, kept in the session's state, which
nothing inside the sandbox can write: what the client reads is what was judged.
"""

from __future__ import annotations

import os
import stat
import zlib

from manager.fs import regular
from manager.fs import sparse
from manager.session import paths

READS = "reads"
MAX_BYTES = 64 << 20   # the Read tool shows far less; a larger file is read with Bash


class NotReadable(Exception):
    """Why the sandbox's file cannot be handed to Read."""


def take(session_id: str, host: str, uppers: list[str]) -> str:
    """A private copy of ``host`` when it lies in one of ``uppers``; else ``host`` itself
    (a real file, which nothing in the sandbox can change)."""
    upper = next((u for u in uppers if host.startswith(u.rstrip("/") + "/")), None)
    if upper is None:
        return host
    fd = _open_below(upper, os.path.relpath(host, upper))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotReadable("it is not a regular file in the sandbox")
        if st.st_size > MAX_BYTES:
            raise NotReadable(f"it is larger than {MAX_BYTES >> 20} MiB")
        return _copy(fd, st.st_size, session_id, host)
    finally:
        os.close(fd)


def _open_below(upper: str, rel: str) -> int:
    """``rel`` under ``upper``, every component opened without following a symlink."""
    try:
        # Only a regular file is opened: a device node the sandbox made is never opened on
        # the host, nor a fifo (it would block) or a socket.
        return regular.open_below(upper, os.path.join(upper, rel))
    except regular.NotRegular as exc:
        raise NotReadable("it is not a regular file in the sandbox") from exc
    except OSError as exc:
        raise NotReadable(f"it changed while it was read ({exc.strerror})") from exc


def _copy(fd: int, size: int, session_id: str, host: str) -> str:
    """The first ``size`` bytes (what was checked: a file a call grows meanwhile is not
    copied past it), holes kept as holes (a sparse file costs the host no more than it
    costs the sandbox)."""
    # One directory per path read (bounded by the files read), the name kept: the client
    # picks how to show a file (image, notebook, PDF) by its extension.
    where = os.path.join(paths.session_root(session_id), READS, f"{zlib.crc32(os.fsencode(host)):08x}")
    os.makedirs(where, mode=0o700, exist_ok=True)
    dest = os.path.join(where, os.path.basename(host))
    tmp = f"{dest}.{os.getpid()}.tmp"
    out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        sparse.copy_data(fd, out, size)
    except OSError:
        os.close(out)
        os.unlink(tmp)
        raise
    os.close(out)
    os.replace(tmp, dest)
    return dest
