"""session/shown: the digest commit compares with what review read (issue 20)."""

from __future__ import annotations

import mmap
from pathlib import Path

import pytest

from manager.session import shown

pytestmark = pytest.mark.as_user


def test_a_write_through_a_shared_mapping_changes_the_digest(tmp_path: Path):
    path = tmp_path / "a.txt"
    path.write_text("good\n")
    with path.open("r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        m[0:4] = b"good"
        before = shown._digest(str(path))
        m[0:4] = b"EVIL"   # the times may stay: the content does not
        assert shown._digest(str(path)) != before


def test_holes_and_written_zeros_digest_alike_and_a_huge_hole_is_not_read(tmp_path: Path):
    sparse, dense = tmp_path / "sparse", tmp_path / "dense"
    with sparse.open("wb") as f:
        f.truncate(5 << 20)
        f.seek(3 << 20)
        f.write(b"hi")
    dense.write_bytes(bytes(3 << 20) + b"hi" + bytes((2 << 20) - 2))
    assert shown._digest(str(sparse)) == shown._digest(str(dense)) != ""
    huge = tmp_path / "huge"
    with huge.open("wb") as f:
        f.truncate(1 << 40)   # 1 TiB of hole: a million block entries, no bytes read
    assert shown._digest(str(huge)) not in ("", shown._digest(str(sparse)))


def test_what_is_not_a_regular_file_has_no_digest(tmp_path: Path):
    (tmp_path / "target").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    assert shown._digest(str(tmp_path / "link")) == ""      # never followed
    assert shown._digest(str(tmp_path)) == ""
    assert shown._digest(str(tmp_path / "gone")) == ""
