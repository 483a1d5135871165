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
    offset = 0
    while offset < size:
        try:
            start = os.lseek(src, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                break  # nothing but a hole up to the end
            raise
        if start >= size:
            break
        end = min(os.lseek(src, start, os.SEEK_HOLE), size)
        _copy_range(src, dst, start, end - start)
        offset = end
    os.ftruncate(dst, size)


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
