"""Hidden paths left out of the sandbox's tree itself, not only covered (stdlib only).

holder/hide.py mounts an empty read-only mask over each hidden path. A call that is the
namespace's root (the holder run by root, or an ordinary user without subordinate ids) may
unmount a mask; what lay under it must then be as empty as the mask. So no mount of the
sandbox's tree shows a hidden path's content to begin with:

* an overlay whose lower layer is a real directory with hidden paths below it gets one more
  lower layer on top, its *mask layer*: a placeholder at each hidden path (an empty opaque
  directory, which overlayfs does not merge with the real one, or an empty file) and the
  directories on the way (merged, with the real ones' mode and owner);
* a snapshotted directory (holder/levels.py) holds a placeholder for a hidden entry in its
  skeleton, never a copy of the real file, and mounts nothing of the real one there;
* no socket under a hidden path is bound into the tree.

The mask layers live on a tmpfs of the holder's own mount namespace at ``SANDBOX/masks``:
overlayfs refuses a lower layer inside another one (the state directory lies inside a real
directory that is itself a lower layer: $HOME, /tmp). Where the kernel cannot mark a
directory opaque there (user extended attributes on tmpfs: Linux 6.6), the masks alone
hide as before, which the holder's log and doctor's probe say.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import subprocess
from pathlib import Path

MASKS = "masks"
OPAQUE = "user.overlay.opaque"   # with the userxattr mount option (a user namespace's overlay)
PLACEHOLDER_DIR = 0o555
PLACEHOLDER_FILE = 0o444


def under(hidden: frozenset[str], path: str) -> bool:
    """``path`` is a hidden path or lies below one."""
    return any(path == h or path.startswith(h + "/") for h in hidden)


def placeholder(real: str, copy: Path) -> str:
    """An empty entry of the real one's kind at ``copy`` (a skeleton's): "hidden"."""
    is_dir = os.path.isdir(real) and not os.path.islink(real)
    if copy.is_dir() and not copy.is_symlink():
        if not is_dir:
            shutil.rmtree(copy)
    elif os.path.lexists(copy):
        copy.unlink()
    if is_dir:
        copy.mkdir(PLACEHOLDER_DIR, exist_ok=True)
        os.chmod(copy, PLACEHOLDER_DIR)
    else:
        os.close(os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PLACEHOLDER_FILE))
        os.chmod(copy, PLACEHOLDER_FILE)
    return "hidden"


class MaskLayers:
    """The mask layer of each overlay point, made when first asked for."""

    def __init__(self, hidden: frozenset[str]) -> None:
        self.hidden = hidden
        self.base = Path()          # where the tmpfs is, as the holder reaches it now
        self.real_prefix = ""
        self.made: dict[str, str] = {}    # point -> its layer's name under base
        self.usable = False
        self.log: list[str] = []

    def rebase(self, sandbox: Path, real_prefix: str) -> None:
        self.base, self.real_prefix = sandbox / MASKS, real_prefix

    def mount(self) -> None:
        """The tmpfs for the layers (before the pivot); unusable (logged) where it cannot be."""
        if not self.hidden:
            return
        self.base.mkdir(exist_ok=True)
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755,size=1m,nr_inodes=65536",
                               "workspace-masks", str(self.base)], capture_output=True, text=True)
        if proc.returncode != 0:
            self.log.append(f"hidden paths: no mask layers ({proc.stderr.strip()}): the masks only")
            return
        try:
            os.setxattr(self.base, OPAQUE, b"y")
            os.removexattr(self.base, OPAQUE)
        except OSError as exc:
            self.log.append(f"hidden paths: no mask layers (cannot mark a directory opaque on "
                            f"tmpfs: {exc}): the masks only")
            return
        self.usable = True

    def lower(self, point: str, real_lower: str) -> str:
        """The lower layers for an overlay of the real ``point`` (reached as ``real_lower``)."""
        below = sorted(h for h in self.hidden if h.startswith(point.rstrip("/") + "/"))
        if not below or not self.usable:
            return real_lower
        name = self.made.get(point)
        if name is None:
            name = hashlib.sha256(point.encode()).hexdigest()[:16]
            self._make(self.base / name, point, below)
            self.made[point] = name
        return f"{self.base / name}:{real_lower}"

    def _make(self, layer: Path, point: str, below: list[str]) -> None:
        layer.mkdir(exist_ok=True)
        self._mirror(layer, point)
        for hidden in below:
            parts = hidden[len(point.rstrip("/")) + 1:].split("/")
            current, real = layer, point
            for part in parts[:-1]:
                current, real = current / part, os.path.join(real, part)
                if not current.is_dir():
                    current.mkdir()
                    self._mirror(current, real)
            entry = current / parts[-1]
            placeholder(self.real_prefix + hidden, entry)
            if entry.is_dir():
                os.setxattr(entry, OPAQUE, b"y")

    def _mirror(self, directory: Path, real: str) -> None:
        """A directory on the way: the overlay shows the topmost layer's mode and owner."""
        with contextlib.suppress(OSError):
            st = os.stat(self.real_prefix + real)
            os.chmod(directory, stat.S_IMODE(st.st_mode))
            os.chown(directory, st.st_uid, st.st_gid)

