"""What the last review of a session read, so the next one rereads only what changed.

Like git's index and untracked cache: a result is reused only while the stat data
it was read from is unchanged. A modified file's verdict (kind, special bits, owner)
is keyed by both its upper and its real entry's inode, mode, size and times; a new
directory's file count by the directory's (its entries cannot change without its
change time moving). Entries changed within the last ``RACY_NS`` are not recorded: a
timestamp's granularity could hide a second change in the same tick (git's "racily
clean" entries).

The record lives in the session's state directory, which sandboxed commands cannot
write (their writes land in the upper layer) and the agent's own file tools are
refused (:mod:`manager.claude.guarded`). A record that cannot be read is ignored; one
that cannot be written is skipped: review is never blocked by its cache.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import time

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs every command ~3 ms
if TYPE_CHECKING:
    from typing import Any

FORMAT = 1
RACY_NS = 2_000_000_000
MISSING = object()


def stat_key(st: os.stat_result) -> tuple[int, ...]:
    # The change time moves with any change to the inode (content, mode, owner,
    # attributes, links, a directory's entries) and cannot be set by its owner.
    return st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns


class WalkCache:
    """A read record (``old``) and the one this walk writes (``new``: what it saw)."""

    __slots__ = ("path", "header", "old", "new", "limit", "changed")

    def __init__(self, path: str | None, header: Any) -> None:
        self.path = path
        self.header = header
        self.old: dict[str, Any] = _load(path, header) if path else {}
        self.new: dict[str, Any] = {}
        self.limit = time.time_ns() - RACY_NS
        self.changed = False

    def get(self, name: str, key: tuple[int, ...]) -> Any:
        """The value recorded for ``name`` under ``key``, else MISSING."""
        hit = self.old.get(name)
        if hit is None or hit[0] != key:
            return MISSING
        self.new[name] = hit
        return hit[1]

    def put(self, name: str, key: tuple[int, ...], value: object, newest_ns: int) -> None:
        """Record ``value`` unless its entries changed too recently to be trusted."""
        if newest_ns < self.limit:
            self.new[name] = (key, value)
            self.changed = True

    def save(self) -> None:
        if self.path is None or not (self.changed or len(self.new) != len(self.old)):
            return
        temporary = f"{self.path}.{os.getpid()}"
        try:
            with open(temporary, "wb") as out:
                out.write(marshal.dumps((FORMAT, self.header, self.new)))
            os.replace(temporary, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)


def _load(path: str, header: Any) -> dict[str, Any]:
    try:
        with open(path, "rb") as record:
            found = marshal.loads(record.read())
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if not (isinstance(found, tuple) and len(found) == 3 and found[0] == FORMAT
            and found[1] == header and isinstance(found[2], dict)):
        return {}
    return found[2]
