"""Issue 20 finding 2: a sparse file the sandbox makes is committed sparse.

``truncate -s 2G sparse.bin`` holds no data blocks; the commit copied its length
as zeros (2 GB written; a 1 TB file fills any disk). Holes must stay holes in
every copy a commit makes, and a file of data and holes keeps its layout. A
hard-linked upper file is always copied (a rename would let its other name keep
writing to the real file), so the hard links below take the copying path on
every engine; the volume mode's export copies every file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.security import commit_support
from tests.security.commit_support import commit_json

pytestmark = pytest.mark.engine
commit_engine = commit_support.commit_engine

MIB = 1 << 20
# First a small file: a commit that writes the holes out fails on it, not by filling
# the disk with the terabyte. Data at the start, in the middle and in the last MiB.
SIZES_MIB = [256, 1 << 20]


def _data_extents(path: Path) -> list[tuple[int, int]]:
    """(start, end) of each data extent, as SEEK_DATA/SEEK_HOLE report them."""
    found = []
    fd = os.open(path, os.O_RDONLY)
    try:
        size, offset = os.fstat(fd).st_size, 0
        while offset < size:
            try:
                start = os.lseek(fd, offset, os.SEEK_DATA)
            except OSError:
                break
            offset = os.lseek(fd, start, os.SEEK_HOLE)
            found.append((start, offset))
    finally:
        os.close(fd)
    return found


def _layout(size_mib: int) -> list[tuple[int, bytes]]:
    return [(0, b"head"), (size_mib // 2, b"middle"), (size_mib - 1, b"tail")]


def _script(size_mib: int) -> str:
    sparse, hole = _names(size_mib)
    writes = [f"printf {data.decode()} | dd of={sparse[0]} bs=1M seek={mib} conv=notrunc "
              "status=none" for mib, data in _layout(size_mib)]
    return " && ".join([f"truncate -s {size_mib}M {sparse[0]}", *writes,
                        f"truncate -s {size_mib}M {hole[0]}",
                        f"ln {sparse[0]} {sparse[1]}", f"ln {hole[0]} {hole[1]}"])


def _names(size_mib: int) -> tuple[list[str], list[str]]:
    """(a file of data and holes, its hard link), (a file all hole, its hard link)."""
    return ([f"sparse{size_mib}.bin", f"sparse{size_mib}-link.bin"],
            [f"hole{size_mib}.bin", f"hole{size_mib}-link.bin"])


def test_a_terabyte_hole_is_committed_as_a_hole(ws, project: Path, commit_engine: str):
    for size_mib in SIZES_MIB:
        ws("run", "--", "sh", "-ec", _script(size_mib), check=True)
        code, result = commit_json(ws)
        assert (code, result["conflicts"]) == (0, []), result
        _check(project, size_mib)


def _check(project: Path, size_mib: int) -> None:
    sparse, hole = _names(size_mib)
    for name in hole:
        st = os.stat(project / name)
        assert (st.st_size, st.st_blocks) == (size_mib * MIB, 0), name
    layout = _layout(size_mib)
    for name in sparse:
        path = project / name
        st = os.stat(path)
        assert st.st_size == size_mib * MIB and st.st_blocks * 512 <= 3 * MIB, name
        assert [start // MIB for start, _ in _data_extents(path)] == [m for m, _ in layout]
        with open(path, "rb") as f:
            for mib, data in layout:
                f.seek(mib * MIB)
                assert f.read(len(data)) == data
