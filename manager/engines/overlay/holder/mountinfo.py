"""The one reader of ``/proc/PID/mountinfo`` (standard library only).

It lives in the holder's package because the holder, a program of its own, can import
nothing outside it; the engines import it from here.
"""

from __future__ import annotations

import os
import select


def read(pid: int | str = "self") -> str:
    with open(f"/proc/{pid}/mountinfo", encoding="utf-8", errors="replace") as f:
        return f.read()


def rows(text: str) -> list[tuple[str, str, str, str]]:
    """(mount id, parent id, mount point, fs type) of each mount, in the table's order."""
    found = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 4:
            sep = fields.index("-", 5) if "-" in fields[5:] else len(fields)
            fstype = fields[sep + 1] if sep + 1 < len(fields) else ""
            found.append((fields[0], fields[1], unescape(fields[4]), fstype))
    return found


def sources(text: str) -> list[tuple[str, str, str, str]]:
    """(root within its filesystem, mount point, fs type, super options) of each mount."""
    found = []
    for line in text.splitlines():
        fields = line.split()
        if "-" in fields[5:]:
            sep = fields.index("-", 5)
            if sep + 3 < len(fields):
                found.append((unescape(fields[3]), unescape(fields[4]), fields[sep + 1],
                              fields[sep + 3]))
    return found


def points(text: str) -> list[str]:
    """The mount points, in the table's order."""
    return [point for _, _, point, _ in rows(text)]


def unescape(field: str) -> str:
    """The kernel's octal escapes (space, tab, newline, backslash) decoded."""
    if "\\" not in field:
        return field
    return field.encode().decode("unicode_escape").encode("latin-1").decode("utf-8", "replace")


class Changes:
    """Whether the sandbox's mount table changed since the last look: /proc/self/mountinfo
    polls with POLLPRI after each change (opened in the pivoted namespace, it stays that
    namespace's whatever namespace the holder steps into for a moment)."""

    def __init__(self) -> None:
        self.fd = os.open("/proc/self/mountinfo", os.O_RDONLY | os.O_CLOEXEC)
        self.poll = select.poll()
        self.poll.register(self.fd, select.POLLPRI)

    def since_last(self) -> bool:
        return bool(self.poll.poll(0))
