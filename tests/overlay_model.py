"""Build upper directories by hand, and a reference model of what an overlay shows.

``view(upper, real)`` merges an upper directory over a real one the way
overlayfs does (whiteouts hide, opaque directories hide everything below, an
upper non-directory hides the real subtree). A commit is correct when the real
tree afterwards equals the view before it.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from manager.changes.model import Layer
from manager.changes.model import is_opaque
from manager.changes.model import is_whiteout

Entry = tuple[object, ...]


@dataclass
class Tree:
    """A real tree and an upper dir built by hand.

    The upper side is born at least one clock tick after the real side was last
    written, as in life (a sandboxed call starts milliseconds after a real edit):
    a real change in the same tick as an upper entry's birth is a conflict
    (see manager.commit.btime.may_follow), so ``u()`` waits for the next file
    timestamp when the building moves from the real side to the upper side.
    """

    root: Path
    upper: Path
    real: Path
    session: Path
    _last_side: str = "upper"

    @classmethod
    def make(cls, root: Path) -> Tree:
        tree = cls(root, root / "upper", root / "real", root / "session")
        for path in (tree.real, tree.session):
            path.mkdir(parents=True)
        return tree

    @property
    def layers(self) -> list[Layer]:
        return [Layer(self.upper, self.real)]

    def u(self, rel: str) -> Path:
        if self._last_side == "real":
            next_stamp(self.root)
            self._last_side = "upper"
        # As overlayfs makes them: an upper directory is born when something below it is
        # first copied up or created (the commit's conflict check reads these births).
        self.upper.mkdir(exist_ok=True)
        return self.upper / rel

    def r(self, rel: str) -> Path:
        self._last_side = "real"
        return self.real / rel


def next_stamp(where: Path) -> None:
    """Return once a file made now gets a later timestamp than one made before the call.

    Timestamps come from a coarse clock whose ticks a loaded machine may deliver
    late, so this watches real files' stamps rather than sleeping a fixed time.
    """
    probe = where / ".tick-probe"
    probe.write_bytes(b"")
    before = os.stat(probe).st_ctime_ns
    try:
        while True:
            time.sleep(0.001)
            probe.unlink()
            probe.write_bytes(b"")
            if os.stat(probe).st_ctime_ns > before:
                return
    finally:
        probe.unlink()


def write(path: Path, data: str | bytes = "", mode: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    if mode is not None:
        path.chmod(mode)
    return path


def whiteout(path: Path, xattr: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if xattr:
        path.write_bytes(b"")
        os.setxattr(path, "trusted.overlay.whiteout", b"y")
    else:
        os.mknod(path, stat.S_IFCHR | 0o600, 0)
    return path


def opaque_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.setxattr(path, "trusted.overlay.opaque", b"y")
    return path


def symlink(path: Path, target: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, path)
    return path


def view(upper: Path | None, real: Path | None) -> dict[str, Entry]:
    out: dict[str, Entry] = {}
    _merge(upper, real, "", out)
    return out


def snapshot(real: Path) -> dict[str, Entry]:
    return view(None, real)


def _names(path: Path | None) -> set[str]:
    if path is None or not path.is_dir() or path.is_symlink():
        return set()
    return set(os.listdir(path))


def _merge(upper: Path | None, real: Path | None, prefix: str, out: dict[str, Entry]) -> None:
    for name in sorted(_names(upper) | _names(real)):
        u = upper / name if upper is not None and name in _names(upper) else None
        r = real / name if real is not None and name in _names(real) else None
        rel = f"{prefix}{name}"
        if u is not None and is_whiteout(u, os.lstat(u)):
            continue
        source = u if u is not None else r
        assert source is not None
        out[rel] = _entry(source)
        if stat.S_ISDIR(os.lstat(source).st_mode):
            hidden = u is not None and (is_opaque(u) or r is None or not _is_dir(r))
            _merge(u, None if hidden else r, rel + "/", out)


def _is_dir(path: Path) -> bool:
    return stat.S_ISDIR(os.lstat(path).st_mode)


def _entry(path: Path) -> Entry:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return ("symlink", os.readlink(path))
    if stat.S_ISDIR(st.st_mode):
        return ("dir", stat.S_IMODE(st.st_mode))
    if stat.S_ISREG(st.st_mode):
        return ("file", stat.S_IMODE(st.st_mode), path.read_bytes())
    return ("other", st.st_mode, st.st_rdev)
