"""Attack pass 7, the class: the host never opens an entry a sandbox made unless it is a
regular file or a directory, proven before the open (manager/fs/regular.py). A device node
(docker's root keeps CAP_MKNOD), a fifo (an open blocks) and a socket sit in the session's
upper directory; the Read hook, status, diff and commit read the upper on the host, and
none may open them (seen with inotify). The overlay sandbox cannot mknod, so the nodes are
made in its upper from here (root), where docker's would land."""

from __future__ import annotations

import json
import os
import socket
import stat
from pathlib import Path

import pytest

from tests.claude.conftest import Claude
from tests.security.test_read_device_node import IN_OPEN
from tests.security.test_read_device_node import opened

pytestmark = pytest.mark.needs_root

SPECIAL = ("dev.txt", "fifo.txt", "sock.txt")


def _make_specials(where: Path) -> None:
    os.mknod(where / "dev.txt", stat.S_IFCHR | 0o666, os.makedev(1, 3))   # the null device
    os.mkfifo(where / "fifo.txt")
    cwd = os.getcwd()
    os.chdir(where)   # a socket's path is short: bind it by name
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind("sock.txt")
    finally:
        os.chdir(cwd)


class Watch:
    def __init__(self, directory: Path) -> None:
        import ctypes

        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0
        assert self.libc.inotify_add_watch(self.fd, str(directory).encode(), IN_OPEN) >= 0

    def seen(self) -> list[str]:
        return opened(self.fd)


def test_host_opens_no_special_entry_of_the_upper(overlay_engine: str, ws, tmp_path: Path,
                                                  project: Path):
    claude = Claude(project, tmp_path)
    assert claude.start().returncode == 0
    assert claude.bash("echo a > seen.txt").returncode == 0
    sandbox = Path(os.environ["XDG_STATE_HOME"]) / "workspace/sessions/sess-1/sandbox"
    where = next(p for p in sandbox.rglob("seen.txt") if p.is_file()).parent
    _make_specials(where)
    watch = Watch(where)
    try:
        for name in SPECIAL:
            read = claude.hook("PreToolUse", {"tool_name": "Read", "permission_mode": "default",
                                              "tool_input": {"file_path": str(project / name)}})
            assert read.decision == "deny", (name, read.stdout, read.stderr)
        status = ws("status", timeout=30)
        diff = ws("diff", timeout=30)
        commit = ws("commit", "--json", timeout=30)
        seen = watch.seen()
    finally:
        os.close(watch.fd)
    assert not set(seen) & set(SPECIAL), seen
    assert "dev.txt" in status.stdout and "commit needs --allow-special" in status.stdout
    assert "special: character device 1,3" in diff.stdout, diff.stdout
    refused = {Path(r["path"]).name for r in json.loads(commit.stdout)["refused"]}
    assert commit.returncode == 1 and "dev.txt" in refused
    assert not os.path.lexists(project / "dev.txt")


def test_every_host_reader_refuses_a_special_entry_unopened(tmp_path: Path):
    """Each reader of an upper's file, given a device, a fifo and a socket: none opened."""
    from manager.changes import diff
    from manager.changes import model
    from manager.claude import readcopy
    from manager.fs import regular
    from manager.review import lines
    from manager.session import shown

    upper = tmp_path / "upper"
    upper.mkdir()
    _make_specials(upper)
    (upper / "plain").write_bytes(b"x\n")
    st_plain = os.lstat(upper / "plain")
    watch = Watch(upper)
    try:
        for name in SPECIAL:
            path = upper / name
            with pytest.raises(regular.NotRegular):
                regular.open_regular(path)
            with pytest.raises(readcopy.NotReadable, match="not a regular file"):
                readcopy.take("sess-1", str(path), [str(upper)])
            assert shown._digest(str(path)) == ""
            # A reader that lstat'ed a regular file, then found this in its place (a swap).
            assert not model.same_content(path, st_plain, upper / "plain", st_plain)
            with pytest.raises(regular.NotRegular):
                diff._read_nofollow(str(path), 2, 1 << 20)
            assert lines._read_lines(str(path)) == []
        seen = watch.seen()
    finally:
        os.close(watch.fd)
    assert not set(seen) & set(SPECIAL), seen
    assert os.read(fd := regular.open_regular(upper / "plain"), 8) == b"x\n"
    os.close(fd)


def test_the_guardrail_index_hashes_regular_files_only(tmp_path: Path):
    """The shadow index hands git our descriptors: a newline in a name and a path past
    longpath's short limit still hash; a device in a file's place is refused, unopened."""
    import subprocess
    from types import SimpleNamespace

    from manager.changes.model import Change
    from manager.changes.model import EntryType
    from manager.changes.model import Kind
    from manager.fs import regular
    from manager.guardrails import shadow

    def change(path: Path) -> Change:   # an upper entry (read below tmp_path) of /proj/...
        real = "/proj/" + str(path.relative_to(tmp_path))
        return Change(real, Kind.ADDED, str(path), EntryType.FILE, None, True)

    def budget() -> list[int]:
        return [shadow.SNAPSHOT_TOTAL_LIMIT]

    odd = tmp_path / "a\nb.txt"
    odd.write_bytes(b"one\n")
    deep = tmp_path / "/".join(["d" * 200] * 16)   # 3,200 bytes: past longpath.SHORT
    deep.mkdir(parents=True)
    (deep / "f.txt").write_bytes(b"two\n")
    where = SimpleNamespace(tmp=tmp_path)
    files = [("100644", change(odd), b"a"), ("100644", change(deep / "f.txt"), b"b")]
    with shadow._hashable(where, files, budget()) as sources:   # type: ignore[arg-type]
        got = subprocess.run(["git", "hash-object", "--no-filters", "--stdin-paths"],
                             input="".join(f"{s}\n" for s in sources), capture_output=True,
                             text=True, check=True).stdout.split()
    want = [subprocess.run(["git", "hash-object", "--stdin"], input=data, capture_output=True,
                           text=True, check=True).stdout.strip() for data in ("one\n", "two\n")]
    assert got == want
    _make_specials(tmp_path)
    watch = Watch(tmp_path)
    try:
        for name in SPECIAL:
            with pytest.raises(regular.NotRegular), \
                    shadow._hashable(where, [("100644", change(tmp_path / name), b"x")],  # type: ignore[arg-type]
                                     budget()):
                pass
        seen = watch.seen()
    finally:
        os.close(watch.fd)
    assert not set(seen) & set(SPECIAL), seen
