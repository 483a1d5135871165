"""Copy a file's bytes keeping its holes.

A sparse file (``truncate -s 1T f``) holds almost no blocks; copying its length
byte by byte would write every zero and could fill the disk. So only the data
extents are copied (found with SEEK_DATA/SEEK_HOLE) and the length is set at the
end; a filesystem without hole support reports the whole file as data.
"""

from __future__ import annotations

import errno
import os

# copy_file_range refuses some pairs (across filesystems on old kernels, some
# special filesystems): read and write instead.
_FALLBACK = (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP)


def copy_data(src: int, dst: int, size: int) -> None:
    """Copy ``size`` bytes of ``src`` to the empty ``dst`` (descriptors); holes stay holes."""
    for start, end in data_extents(src, size):
        _copy_range(src, dst, start, end - start)
    os.ftruncate(dst, size)


def data_extents(fd: int, size: int) -> list[tuple[int, int]]:
    """(start, end) of each stretch of data in the first ``size`` bytes of ``fd`` (its
    file position is left where it was)."""
    position = os.lseek(fd, 0, os.SEEK_CUR)
    try:
        return _extents(fd, size)
    finally:
        os.lseek(fd, position, os.SEEK_SET)


def _extents(fd: int, size: int) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                break  # nothing but a hole up to the end
            raise
        if start >= size:
            break
        offset = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        found.append((start, offset))
    return found


def _copy_range(src: int, dst: int, start: int, count: int) -> None:
    done = 0
    try:
        while done < count:
            sent = os.copy_file_range(src, dst, count - done, start + done, start + done)
            if sent == 0:
                return  # the file shrank meanwhile
            done += sent
    except OSError as exc:
        if exc.errno not in _FALLBACK:
            raise
        while done < count:
            chunk = os.pread(src, min(count - done, 1 << 20), start + done)
            if not chunk:
                return
            os.pwrite(dst, chunk, start + done)
            done += len(chunk)
