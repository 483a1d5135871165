"""When an upper entry was born: the moment the overlay copied it up or created it.

A real path whose ctime is not earlier than that may have changed behind the
sandbox's back (:func:`may_follow`). Birth time comes from statx(2)
(``STATX_BTIME``), which Python's ``os`` does not expose; where the kernel or
filesystem has none, the session's start stands in when known (earlier than
any birth: a conflict may be reported that was none, never the reverse), else
the entry's ctime.
"""

from __future__ import annotations

import ctypes
import os
import platform

AT_FDCWD = -100
AT_SYMLINK_NOFOLLOW = 0x100
STATX_BTIME = 0x800
_SYSCALL_NR = {"x86_64": 332, "aarch64": 291}


class _Timestamp(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_int64), ("tv_nsec", ctypes.c_uint32),
                ("reserved", ctypes.c_int32)]


class _Statx(ctypes.Structure):
    _fields_ = [
        ("mask", ctypes.c_uint32), ("blksize", ctypes.c_uint32), ("attributes", ctypes.c_uint64),
        ("nlink", ctypes.c_uint32), ("uid", ctypes.c_uint32), ("gid", ctypes.c_uint32),
        ("mode", ctypes.c_uint16), ("spare0", ctypes.c_uint16), ("ino", ctypes.c_uint64),
        ("size", ctypes.c_uint64), ("blocks", ctypes.c_uint64),
        ("attributes_mask", ctypes.c_uint64), ("atime", _Timestamp), ("btime", _Timestamp),
        ("ctime", _Timestamp), ("mtime", _Timestamp), ("rest", ctypes.c_uint8 * 128),
    ]


_libc = ctypes.CDLL(None, use_errno=True)
_syscall_nr = _SYSCALL_NR.get(platform.machine())


def _statx(dir_fd: int, name: str, buf: _Statx) -> int:
    raw = os.fsencode(name)
    func = getattr(_libc, "statx", None)
    if func is not None:
        return int(func(dir_fd, raw, AT_SYMLINK_NOFOLLOW, STATX_BTIME, ctypes.byref(buf)))
    if _syscall_nr is None:
        return -1
    return int(_libc.syscall(_syscall_nr, dir_fd, raw, AT_SYMLINK_NOFOLLOW, STATX_BTIME,
                             ctypes.byref(buf)))


# Births recorded elsewhere, by absolute path: upper dirs copied from a container engine's
# volume were born at extraction here; their real births are the volume's (remember()).
_remembered: dict[str, int] = {}


_floor: list[int] = []  # the session's start: no upper entry is older


def remember(births: dict[str, int]) -> None:
    _remembered.update(births)


def set_floor(ns: int) -> None:
    """The earliest any upper entry can have been born (where statx knows no birth)."""
    _floor[:] = [ns]


def may_follow(ctime_ns: int, birth_ns: int) -> bool:
    """Whether a change stamped ``ctime_ns`` may have come after a birth at ``birth_ns``.

    Equal stamps may: timestamps come from a coarse clock (one tick is
    milliseconds), so a copy-up and an edit right after it often share one, and
    only a strict ``>`` lost such edits. A ctime in whole seconds comes from a
    filesystem with coarse timestamps (1 s, or FAT's 2 s): the birth is rounded
    down to that grain before comparing.
    """
    if ctime_ns % 1_000_000_000 == 0:
        birth_ns -= birth_ns % 2_000_000_000
    return ctime_ns >= birth_ns


def birth_ns(dir_fd: int, name: str) -> int:
    """Birth time of ``name`` in ``dir_fd`` in ns (see the module's notes where unknown)."""
    if dir_fd == AT_FDCWD and name in _remembered:
        return _remembered[name]
    buf = _Statx()
    if _statx(dir_fd, name, buf) == 0 and buf.mask & STATX_BTIME:
        stamp: _Timestamp = buf.btime
        return int(stamp.tv_sec) * 1_000_000_000 + int(stamp.tv_nsec)
    if _floor:
        return _floor[0]
    return int(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_ctime_ns)
