"""A path as the sandbox sees it: each layer's upper directory over the real tree.

Read is redirected to the sandbox's copy of a file, and the client then opens that
copy on the host. A symlink the sandbox made (``notes.md -> /secret/key``) would be
followed there, on the host, to a target no rule was asked about. So the chain is
resolved here, component by component and link by link, the way the sandbox resolves
it, and the caller judges (and hands the client) the file at its end.
"""

from __future__ import annotations

import os
import stat

OPAQUE = ("trusted.overlay.opaque", "user.overlay.opaque")
MAX_LINKS = 40          # as the kernel's limit on symlinks followed in one lookup


class Resolved:
    __slots__ = ("target", "host", "through_upper")

    def __init__(self, target: str, host: str | None, through_upper: bool) -> None:
        self.target = target                # the path the sandbox ends at
        self.host = host                    # where its content is on the host; None: absent
        self.through_upper = through_upper  # a link on the way, or the end, is the sandbox's


def resolve(layers: list[list[str]], path: str) -> Resolved | None:
    """Follow ``path`` (absolute) in the sandbox's view; None for a symlink loop."""
    todo = [p for p in path.split("/") if p]
    current, links, through = "/", 0, False
    while todo:
        name = todo.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, name)
        host, upper = host_path(layers, candidate)
        st = _lstat(host)
        if st is None:
            return Resolved(os.path.join(candidate, *todo), None, through or upper)
        if stat.S_ISLNK(st.st_mode):
            through = through or upper        # a link the sandbox made or replaced
            links += 1
            if links > MAX_LINKS or host is None:
                return None
            link = os.readlink(host)
            todo = [p for p in link.split("/") if p] + todo
            if link.startswith("/"):
                current = "/"
            continue
        current = candidate
    host, upper = host_path(layers, current)
    return Resolved(current, host, through or upper)


def host_path(layers: list[list[str]], path: str) -> tuple[str | None, bool]:
    """(where ``path``, whose parents are directories, is on the host; whether that is
    in an upper directory). None: the sandbox deleted it (a whiteout, an opaque parent)."""
    for upper, real in layers:
        if path != real and not path.startswith(real.rstrip("/") + "/"):
            continue
        rel = os.path.relpath(path, real)
        current, hidden = upper, False
        for name in ([] if rel == "." else rel.split("/")):
            current = os.path.join(current, name)
            st = _lstat(current)
            if st is None:
                return (None, True) if hidden else (path, False)
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                return None, True
            hidden = hidden or (stat.S_ISDIR(st.st_mode) and opaque(current))
        return current, True
    return path, False


def _lstat(path: str | None) -> os.stat_result | None:
    if path is None:
        return None
    try:
        return os.lstat(path)
    except OSError:
        return None


def opaque(path: str) -> bool:
    for name in OPAQUE:
        try:
            if os.getxattr(path, name, follow_symlinks=False) == b"y":
                return True
        except OSError:
            continue
    return False
