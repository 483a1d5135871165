"""session/shown: the digest commit compares with what review read (issue 20)."""

from __future__ import annotations

import mmap
import os
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


def _set_xattr(path: Path) -> None:
    os.setxattr(path, "user.k", b"v")


CHANGES = {   # each attribute commit applies, changed on an entry made as "f" (a file), "l"
    # (a symlink to f) or "d" (a directory)
    "content": ("f", lambda p: p.write_text("EVIL\n")),
    "mode": ("f", lambda p: p.chmod(0o755)),
    "setuid": ("f", lambda p: p.chmod(0o4644)),
    "setgid": ("f", lambda p: p.chmod(0o2644)),
    "sticky-dir": ("d", lambda p: p.chmod(0o1755)),
    "dir-mode": ("d", lambda p: p.chmod(0o700)),
    "target": ("l", lambda p: (p.unlink(), p.symlink_to("/etc/hostname"))),
    "file-to-symlink": ("f", lambda p: (p.unlink(), p.symlink_to("f"))),
    "symlink-to-file": ("l", lambda p: (p.unlink(), p.write_text("ok\n"))),
    "dir-to-file": ("d", lambda p: (p.rmdir(), p.write_text("ok\n"))),
    "gone": ("f", lambda p: p.unlink()),
    "xattr": ("f", _set_xattr),
}
if os.geteuid() == 0:   # only root's commit applies the owner (an ordinary user's owns all)
    CHANGES["owner"] = ("f", lambda p: os.chown(p, 1, 1))


@pytest.mark.parametrize("change", list(CHANGES))
def test_every_attribute_commit_applies_changes_the_entry(tmp_path: Path, change: str):
    kind, make = CHANGES[change]
    (tmp_path / "f").write_text("ok\n")
    (tmp_path / "f").chmod(0o644)
    path = tmp_path / "e"
    if kind == "f":
        path.write_text("ok\n")
        path.chmod(0o644)
    elif kind == "l":
        path.symlink_to("f")
    else:
        path.mkdir(mode=0o755)
        path.chmod(0o755)
    before = shown.entry(str(path))
    assert shown.entry(str(path)) == before   # stable: nothing changed, nothing differs
    make(path)
    assert shown.entry(str(path)) != before, change


def test_a_record_of_another_format_asks_for_a_new_review(tmp_path: Path):
    from manager.changes.model import Layer
    from manager.changes.model import read_changes
    from manager.session.store import Session

    project = tmp_path / "proj"
    project.mkdir()
    session = Session("shown0001", str(project), "docker")
    (session.sandbox / "running").mkdir(parents=True)   # a container session's call records
    upper = session.sandbox / "upper"
    (upper / str(project).lstrip("/")).mkdir(parents=True)
    (upper / str(project).lstrip("/") / "a.txt").write_text("shown\n")
    found = read_changes([Layer(upper=upper, target=Path("/"), scaffold=frozenset(), ids=None)],
                         project)
    shown.record(session, found)
    seen = shown.current(session)
    assert seen is not None and not seen.stale and shown.late(seen, found) == []
    record = session.sandbox / shown.RECORD
    body = record.read_bytes().partition(b"\n")[2]
    calls = os.stat(session.sandbox / "running").st_mtime_ns
    count = len(body.split(b"\0"))
    for head, rest in ((b"%d 3 -1" % calls, body),     # the digests-only format
                       (b"v9 %d 3" % calls, body),      # a later one
                       (b"v2 %d %d" % (calls, count), body.rpartition(b"\0")[0])):   # cut short
        record.write_bytes(head + b"\n" + rest)
        seen = shown.current(session)
        assert seen is not None and seen.stale, head
        refused = shown.late(seen, found)   # every pending path
        assert str(project / "a.txt") in refused and len(refused) == len(found), head
    record.write_bytes(b"%d 3 -1\n" % (calls - 1) + body)   # an old record of an earlier call
    assert shown.current(session) is None
