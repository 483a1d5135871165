"""Tar streams for the tarstream tests, and a runner for any interpreter the package accepts.

Standard library only: ``python tests/changes/tarstream_cases.py DIR`` runs every case under that
python (Debian 12's 3.11.2, the sandbox image's) with this checkout's ``manager`` package;
it prints "ok N" and exits 0, or fails with the case's error.
"""

from __future__ import annotations

import io
import os
import sys
import tarfile
from pathlib import Path

Member = tuple[tarfile.TarInfo, bytes]


def stream(*members: Member) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            info.size = len(data) if info.isreg() else 0
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    buf.seek(0)
    return buf


def info(name: str, kind: bytes = tarfile.REGTYPE, **kw: object) -> tarfile.TarInfo:
    entry = tarfile.TarInfo(name)
    entry.type = kind
    entry.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
    for key, value in kw.items():
        setattr(entry, key, value)
    return entry


HOSTILE: dict[str, list[Member]] = {
    "absolute": [(info("/etc/evil"), b"x")],
    "dotdot": [(info("../evil"), b"x")],
    "through-symlink": [(info("a", tarfile.SYMTYPE, linkname="/tmp"), b""),
                        (info("a/evil"), b"x")],
    "twice": [(info("a"), b"x"), (info("a"), b"y")],
    "hardlink-out": [(info("h", tarfile.LNKTYPE, linkname="/etc/passwd"), b"")],
}


def upper_stream() -> io.BytesIO:
    """What the container's tar writes: births side file, upper/ with every kind of entry."""
    opaque = info("upper/d", tarfile.DIRTYPE,
                  pax_headers={"SCHILY.xattr.trusted.overlay.opaque": "y"})
    return stream((info("births"), b"1 ./x\0"), (info("upper", tarfile.DIRTYPE), b""),
                  (info("upper/x"), b"x"), (opaque, b""), (info("upper/d/f"), b"f\n"),
                  (info("upper/ro", tarfile.DIRTYPE, mode=0o555), b""),
                  (info("upper/ro/in"), b"in"),
                  (info("upper/gone", tarfile.CHRTYPE, devmajor=0, devminor=0, mode=0), b""),
                  (info("upper/hard", tarfile.LNKTYPE, linkname="upper/x"), b""),
                  (info("upper/link", tarfile.SYMTYPE, linkname="/etc/passwd"), b""))


def check_upper(dest: Path) -> None:
    from manager.changes.model import is_opaque
    from manager.changes.model import is_whiteout

    assert (dest / "x").read_text() == "x" and (dest / "d/f").read_text() == "f\n"
    assert is_opaque(dest / "d"), "opaque mark lost"
    assert is_whiteout(dest / "gone", os.lstat(dest / "gone")), "whiteout lost"
    assert os.stat(dest / "ro").st_mode & 0o777 == 0o555 and (dest / "ro/in").read_text() == "in"
    assert os.path.samefile(dest / "hard", dest / "x")
    assert os.readlink(dest / "link") == "/etc/passwd"


def run_all(tmp: Path) -> int:
    from manager.changes import tarstream

    side = tarstream.unpack(upper_stream(), tmp / "upper", root="upper")
    assert side == {"births": b"1 ./x\0"}, side
    check_upper(tmp / "upper")
    for name, members in HOSTILE.items():
        try:
            tarstream.unpack(stream(*members), tmp / name)
        except tarstream.UnsafeEntry:
            continue
        raise AssertionError(f"hostile stream {name} was unpacked")
    assert not Path("/tmp/evil").exists() and not (tmp / "evil").exists()
    return 1 + len(HOSTILE)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    print(f"ok {run_all(Path(sys.argv[1]))}")
