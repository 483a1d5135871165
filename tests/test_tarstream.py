"""Upper dirs through tar streams: overlay marks survive, hostile streams are refused."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from manager.changes import tarstream
from manager.changes.model import is_opaque
from manager.changes.model import is_whiteout


def _stream(*members: tuple[tarfile.TarInfo, bytes]) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    buf.seek(0)
    return buf


def _info(name: str, kind: bytes = tarfile.REGTYPE, **kw: object) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    for key, value in kw.items():
        setattr(info, key, value)
    return info


def test_round_trip_keeps_whiteouts_opaque_dirs_and_modes(tmp_path: Path):
    if os.geteuid() != 0:
        pytest.skip("trusted.* xattrs need root")
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    os.setxattr(src / "d", "trusted.overlay.opaque", b"y")
    (src / "d/f").write_text("f\n")
    os.mknod(src / "gone", stat.S_IFCHR, os.makedev(0, 0))
    (src / "ro").mkdir(mode=0o555)
    os.symlink("/etc/passwd", src / "link")
    buf = io.BytesIO()
    tarstream.pack(src, buf)
    buf.seek(0)
    dest = tmp_path / "dest"
    tarstream.unpack(buf, dest)
    assert is_opaque(dest / "d") and (dest / "d/f").read_text() == "f\n"
    assert is_whiteout(dest / "gone", os.lstat(dest / "gone"))
    assert stat.S_IMODE(os.stat(dest / "ro").st_mode) == 0o555
    assert os.readlink(dest / "link") == "/etc/passwd"


def test_side_files_and_root_prefix(tmp_path: Path):
    buf = _stream((_info("births"), b"1 ./x\0"), (_info("upper", tarfile.DIRTYPE), b""),
                  (_info("upper/x"), b"x"))
    side = tarstream.unpack(buf, tmp_path / "d", root="upper")
    assert side == {"births": b"1 ./x\0"}
    assert (tmp_path / "d/x").read_text() == "x"


@pytest.mark.parametrize("members", [
    [(_info("/etc/evil"), b"x")],
    [(_info("../evil"), b"x")],
    [(_info("a", tarfile.SYMTYPE, linkname="/tmp"), b""), (_info("a/evil"), b"x")],
    [(_info("a"), b"x"), (_info("a"), b"y")],
    [(_info("h", tarfile.LNKTYPE, linkname="/etc/passwd"), b"")],
], ids=["absolute", "dotdot", "through-symlink", "twice", "hardlink-out"])
def test_hostile_streams_are_refused(tmp_path: Path, members):
    with pytest.raises(tarstream.UnsafeEntry):
        tarstream.unpack(_stream(*members), tmp_path / "d")
    assert not Path("/tmp/evil").exists()
