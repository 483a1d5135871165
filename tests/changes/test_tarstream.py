"""Upper dirs through tar streams: overlay marks survive, hostile streams are refused."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from manager.changes import tarstream
from manager.changes.model import is_opaque
from manager.changes.model import is_whiteout
from tests.changes.tarstream_cases import HOSTILE
from tests.changes.tarstream_cases import info
from tests.changes.tarstream_cases import stream

CASES = Path(__file__).with_name("tarstream_cases.py")


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
    buf = stream((info("births"), b"1 ./x\0"), (info("upper", tarfile.DIRTYPE), b""),
                  (info("upper/x"), b"x"))
    side = tarstream.unpack(buf, tmp_path / "d", root="upper")
    assert side == {"births": b"1 ./x\0"}
    assert (tmp_path / "d/x").read_text() == "x"


@pytest.mark.parametrize("members", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_streams_are_refused(tmp_path: Path, members):
    with pytest.raises(tarstream.UnsafeEntry):
        tarstream.unpack(stream(*members), tmp_path / "d")
    assert not Path("/tmp/evil").exists()


def _interpreters() -> list[str]:
    """This one, and Debian's own where there is one (3.11.2 on Debian 12: no extractall filter)."""
    found = [sys.executable]
    debian = Path("/usr/bin/python3")
    if debian.exists() and not Path(sys.executable).samefile(debian):
        found.append(str(debian))
    return found


@pytest.mark.parametrize("python", _interpreters())
def test_every_python_the_package_accepts(tmp_path: Path, python: str):
    """Streams unpack, marks survive and hostile streams are refused with and without filter=."""
    version = subprocess.run([python, "-c", "import sys; print(sys.version_info >= (3, 11))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    if version != "True":
        pytest.skip(f"{python} is older than the package's requires-python")
    proc = subprocess.run([python, "-I", str(CASES), str(tmp_path)], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"ok {1 + len(HOSTILE)}\n"


def test_the_stdlib_filter_is_detected():
    assert (sys.version_info >= (3, 11, 4)) == tarstream.HAS_FILTER


def _sparse_upper(root: Path) -> Path:
    """A file of 64 MiB: data at 0 and at 40 MiB, holes elsewhere (a trailing one too)."""
    root.mkdir()
    with open(root / "sparse.bin", "wb") as f:
        f.write(b"head")
        f.seek(40 << 20)
        f.write(b"middle")
        f.truncate(64 << 20)
    (root / "all-hole.bin").write_bytes(b"")
    os.truncate(root / "all-hole.bin", 64 << 20)
    return root


def _check_sparse(root: Path) -> None:
    assert os.stat(root / "all-hole.bin").st_size == 64 << 20
    assert os.stat(root / "all-hole.bin").st_blocks == 0
    st = os.stat(root / "sparse.bin")
    assert st.st_size == 64 << 20 and st.st_blocks * 512 <= 1 << 20
    with open(root / "sparse.bin", "rb") as f:
        assert f.read(4) == b"head"
        f.seek(40 << 20)
        assert f.read(6) == b"middle"
        f.seek((40 << 20) - 4)
        assert f.read(4) == b"\0" * 4


def test_holes_stay_holes_both_ways(tmp_path: Path):
    """pack writes GNU sparse members (what the container's tar extracts into the volume),
    unpack extracts the ones the container's ``tar --sparse`` writes."""
    src = _sparse_upper(tmp_path / "src")
    buf = io.BytesIO()
    tarstream.pack(src, buf)
    assert len(buf.getvalue()) < 1 << 20
    by_gnu_tar = tmp_path / "gnu"
    by_gnu_tar.mkdir()
    subprocess.run(["tar", "-C", str(by_gnu_tar), "-xf", "-"], input=buf.getvalue(), check=True)
    _check_sparse(by_gnu_tar)
    buf.seek(0)
    tarstream.unpack(buf, tmp_path / "python")
    _check_sparse(tmp_path / "python")
    made = subprocess.run(["tar", "-C", str(src), "--sparse", "-cf", "-", "."],
                          capture_output=True, check=True).stdout
    tarstream.unpack(io.BytesIO(made), tmp_path / "from-gnu")
    _check_sparse(tmp_path / "from-gnu")
