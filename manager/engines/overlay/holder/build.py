"""What the holder mounts: the sandbox's view of the filesystem under ``temproot``.

In a user namespace a directory with mounts below it cannot be an overlay lower layer,
so such directories get a skeleton (:class:`Builder`); sockets of live daemons are bound
over their overlay copies.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from . import kernel
from . import levels
from . import masklayer
from . import mountinfo
from . import names

if TYPE_CHECKING:
    from .watch import LevelWatch

PASSTHROUGH = ("/proc", "/sys", "/dev")
OVERFLOW_ID = 65534  # what an id without a mapping in this user namespace reads as


def mount_points() -> list[tuple[str, str]]:
    """(mount point, fs type) for every mount, parents before children."""
    found = {point: fstype for _, _, point, fstype in mountinfo.rows(mountinfo.read())}
    return sorted(found.items(), key=lambda item: (item[0].count("/"), item[0]))


def run_mount(*args: str, pass_fds: tuple[int, ...] = ()) -> str | None:
    proc = subprocess.run(["mount", *args], capture_output=True, text=True, pass_fds=pass_fds)
    return None if proc.returncode == 0 else (proc.stderr.strip() or f"mount exited {proc.returncode}")


SKELETON_FILE_LIMIT = 1 << 20
DIR_NOFOLLOW = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# overlayfs cannot pass connect() through to a socket of its lower layer (ECONNREFUSED):
# sockets in the directories daemons use are bound over their overlay copies.
SOCKET_ROOTS = ("/run", "/tmp", "/var/tmp")
SOCKET_DEPTH = 2             # /tmp/.X11-unix/X0, /run/postgresql/.s.PGSQL.5432
SOCKET_SCAN_LIMIT = 10_000   # entries looked at per directory overlaid


class Builder:
    """Mounts the sandbox's view of the filesystem under ``temproot``.

    In a user namespace a directory with mounts below it cannot be an overlay
    lower layer (the kernel refuses to reveal what those mounts cover). Such a
    directory ("/" always) gets a skeleton instead -- its entries copied one
    level deep -- as the lower layer, and each entry is then overlaid on its
    own: directly when nothing is mounted below it, else by the same rule.
    Every write lands in ``upperdir/<absolute path>`` either way.

    Each such directory is watched (``levels``), so that a call can ask for the
    snapshot to be brought up to date (``overlay_levels.refresh``).
    """

    def __init__(self, sandbox: Path, watch: LevelWatch | None = None) -> None:
        self.watch = watch
        self.masks = masklayer.MaskLayers(frozenset())
        self.levels: list[str] = []
        self.real_prefix = ""   # where the real filesystem is, once the holder has pivoted
        self.host_ns = -1       # the host's mount namespace, kept open once the holder has pivoted
        self.own_ns = -1        # the pivoted one
        self.rebase(sandbox)
        self.log: list[str] = []
        self.logged = 0          # lines of ``log`` already in mount.log
        self.mounts: list[str] = []
        self.binds: list[str] = []
        self.scaffold: list[str] = []
        self.live: frozenset[str] | None = None   # listening_sockets(), read when needed
        self.hidden: frozenset[str] = frozenset()   # mounted over (holder/hide.py): refreshes skip them
        self.overlaid: set[str] = set()   # points recorded in names.OVERLAID by this holder

    def hide(self, hidden: frozenset[str]) -> None:
        """The hidden paths, before the build: it leaves them out (holder/masklayer.py)."""
        self.hidden = self.masks.hidden = hidden

    def rebase(self, sandbox: Path, real_prefix: str = "") -> None:
        """Paths as the holder reaches them (after its pivot: through /proc/self/fd)."""
        self.sandbox = sandbox
        self.upper = sandbox / names.UPPER
        self.work = sandbox / names.WORK
        self.root = sandbox / names.ROOT
        self.skeleton = sandbox / names.SKELETON
        self.staging = sandbox / names.STAGING
        self.real_prefix = real_prefix
        self.masks.rebase(sandbox, real_prefix)

    def build(self, project: str = "") -> None:
        for d in (self.upper, self.work, self.root, self.skeleton, self.staging):
            d.mkdir(exist_ok=True)
        self.mounts = [p for p, _ in mount_points()]   # the host's: before the masks' own tmpfs
        self.masks.mount()
        self.log.extend(self.masks.log)
        if project and _foreign_on_the_way(project):
            # overlayfs cannot copy up a directory whose owner has no id in this user
            # namespace (EOVERFLOW): without these nothing could be written in the project.
            with contextlib.suppress(OSError):
                os.close(self.make_upper(project))
        self.level("/")
        self.bind_files()
        self.private_shm()

    def at(self, base: Path, point: str) -> Path:
        return Path(str(base) + point) if point != "/" else base

    def has_mounts_below(self, path: str) -> bool:
        prefix = path.rstrip("/") + "/"
        return any(m.startswith(prefix) for m in self.mounts)

    def level(self, directory: str) -> None:
        try:
            names = sorted(os.listdir(directory))
        except PermissionError:
            self.unreadable(directory)
            return
        skeleton = self.at(self.skeleton, directory)
        skeleton.mkdir(parents=True, exist_ok=True)
        self.watch_level(directory)
        entries = self.fill_skeleton(directory, names, skeleton)
        error = self.overlay(directory, lower=str(skeleton))
        if error:
            raise RuntimeError(f"cannot overlay {directory}: {error}")
        for name in entries:
            with contextlib.suppress(FileNotFoundError):
                self.entry(os.path.join(directory, name))

    def watch_level(self, directory: str) -> None:
        """Changes from here on are queued for the next call (before listing: none is missed)."""
        if self.watch is None:
            return
        try:
            self.watch.add(directory)
        except OSError as exc:
            self.log.append(f"{directory}: cannot watch for outside changes ({exc}); the sandbox "
                            "shows its entries as they were when it started")
            return
        self.levels.append(directory)

    def unreadable(self, directory: str) -> None:
        """A directory this user cannot list (e.g. /run/docker, 0700, while a container runs).

        Shown as the user sees it: present, its contents out of reach (its parent's
        skeleton holds it empty). Read-only, so that nothing is written where commit
        could never put it.
        """
        target = str(self.at(self.root, directory))
        error = run_mount("--bind", target, target) or run_mount("-o", "remount,bind,ro", target)
        state = "empty and read-only" if error is None else f"empty ({error})"
        self.log.append(f"{directory}: not readable by this user; {state} inside the sandbox")

    def fill_skeleton(self, directory: str, names: list[str], skeleton: Path) -> list[str]:
        subdirs = []
        for name in names:
            real = os.path.join(directory, name)
            try:
                kind = self.skeleton_entry(real, skeleton / name)
            except FileNotFoundError:
                continue  # removed while we looked (other processes keep working)
            if kind == "dir":
                subdirs.append(name)
            elif kind == "bind":
                self.binds.append(real)
        os.chmod(skeleton, os.stat(directory).st_mode & 0o7777)
        return subdirs

    def skeleton_entry(self, real: str, copy: Path) -> str:
        """Mirror one entry into the skeleton: "dir" (to overlay next), "link", "copy" or
        "bind" (sockets, fifos, devices and large files: bound over a placeholder once the
        level is mounted, large files read-only); a hidden path: "hidden", an empty one of
        its kind and nothing mounted there. A new version of a file replaces the old
        one by rename, so a mount still reading the old one reads it whole."""
        if real[len(self.real_prefix):] in self.hidden:
            return masklayer.placeholder(real, copy)
        if os.path.islink(real):
            staged = self.staged(copy)
            os.symlink(os.readlink(real), staged)
            _chown_like(staged, os.lstat(real))
            os.replace(staged, copy)
            return "link"
        if os.path.isdir(real):
            copy.mkdir(exist_ok=True)
            os.chmod(copy, os.stat(real).st_mode & 0o7777)
            return "dir"
        staged = self.staged(copy)
        if self.stale_socket(real):
            # No daemon behind it: a socket of its own, which `rm` can remove (a bound one
            # is a mount point: EBUSY).
            os.mknod(staged, stat.S_IFSOCK | (os.lstat(real).st_mode & 0o7777))
            _chown_like(staged, os.lstat(real))
            os.replace(staged, copy)
            return "socket"
        if os.path.isfile(real) and os.path.getsize(real) <= SKELETON_FILE_LIMIT and _copy(real, staged):
            # The real owner: a command runs as the user, not as this namespace's root,
            # when subordinate ids are mapped, and must be able to write its own files.
            _chown_like(staged, os.stat(real))
            os.replace(staged, copy)
            return "copy"
        staged.touch()
        os.replace(staged, copy)
        return "bind"

    def staged(self, copy: Path) -> Path:
        staged = self.staging / hashlib.sha256(str(copy).encode()).hexdigest()[:16]
        staged.unlink(missing_ok=True)
        return staged

    def work_dir(self, point: str) -> Path:
        """A fresh work directory for one overlay of ``point``: overlayfs marks its work
        directory in use for the overlay's whole life, and only the first of two overlays
        sharing one holds the mark. Each its own, every live overlay is seen by commit's
        probe (manager/fs/overlay_inuse.py; attack pass 19)."""
        while True:   # a random name: one left by an earlier holder is never met
            name = f"{hashlib.sha256(point.encode()).hexdigest()[:16]}.{os.urandom(6).hex()}"
            work = self.work / name
            with contextlib.suppress(FileExistsError):
                work.mkdir()
                return work

    def stale_socket(self, real: str) -> bool:
        try:
            if not stat.S_ISSOCK(os.lstat(real).st_mode):
                return False
        except OSError:
            return False  # gone: bind_files skips it
        if self.live is None:
            self.live = listening_sockets()
        return os.path.realpath(real) not in self.live

    def bind_files(self) -> None:
        for real in self.binds:
            target = str(self.at(self.root, real))
            if not os.path.lexists(real):
                continue  # gone since the skeleton or the socket scan saw it
            error = run_mount("--bind", real, target)
            if error is None and os.path.isfile(real):
                error = run_mount("-o", "remount,bind,ro", target)
                if error is not None:
                    subprocess.run(["umount", "-l", target], capture_output=True)
            if error is not None:
                self.log.append(f"{real}: cannot bind ({error}); an empty file in the sandbox")

    def entry(self, path: str) -> None:
        if path == "/dev":   # roothard: no host device inside (holder/kernel.py)
            kernel.minimal_dev(str(self.at(self.root, path)))
        elif path in PASSTHROUGH:
            self.bind(path)  # recursive: covers /dev/pts, /sys/fs/cgroup, ...
        elif self.has_mounts_below(path):
            self.level(path)
        else:
            error = self.overlay(path, lower=path, masked=True)
            if error:
                self.readonly_bind(path, error)
            elif any(path == r or path.startswith(r + "/") for r in SOCKET_ROOTS):
                self.binds.extend(p for p in sockets_below(path) if not self.stale_socket(p)
                                  and not masklayer.under(self.hidden, p))

    def overlay(self, point: str, lower: str, masked: bool = False) -> str | None:
        """``masked``: ``lower`` is the real directory, below the mask layer of ``point``."""
        if any(c in p for p in (point, lower) for c in ",:"):
            return "path has ',' or ':' (overlayfs option syntax)"
        try:
            upper = self.make_upper(point)
        except OSError as exc:
            return str(exc)
        try:
            work = self.work_dir(point)
            lowers = self.masks.lower(point, lower) if masked else lower
            # The upper by its descriptor: no path is looked up again after make_upper's walk.
            options = (f"userxattr,index=off,lowerdir={lowers},upperdir=/proc/self/fd/{upper},"
                       f"workdir={work}")
            return run_mount("-t", "overlay", "overlay", "-o", options,
                             str(self.at(self.root, point)), pass_fds=(upper,))
        finally:
            os.close(upper)

    def make_upper(self, point: str) -> int:
        """A descriptor of the upper directory for ``point`` (the caller closes it), each
        level with the real one's mode and owner.

        An overlay's root directory takes its attributes from the upper layer, so
        /tmp must keep 1777 and /root 0700. These directories are scaffolding,
        recorded so that review does not list them as changes. The walk follows no link:
        below the sandbox's upper directory every name is the sandbox's to make, and a
        symlink a command left where a real directory appeared later would point the
        holder's chmod, chown and mount at any host path (attack pass 17). An entry there
        that is not a directory is an error: the point is not overlaid.
        """
        fd = os.open(self.upper, DIR_NOFOLLOW)
        try:
            real = "/"
            _like(fd, os.stat(self.real_prefix + real))
            for part in [p for p in point.split("/") if p]:
                real = os.path.join(real, part)
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, dir_fd=fd)
                    self.scaffold.append(real)
                try:
                    below = os.open(part, DIR_NOFOLLOW, dir_fd=fd)
                except OSError as exc:
                    raise OSError(exc.errno, f"the sandbox holds a non-directory at {real} "
                                  f"(upper {self.upper}{real}): {exc.strerror}") from None
                os.close(fd)
                fd = below
                _like(fd, os.stat(self.real_prefix + real))
        except BaseException:
            os.close(fd)
            raise
        self._note_overlaid(point)
        return fd

    def _note_overlaid(self, point: str) -> None:
        """Record that an overlay's upper is ``point``'s, for good: commit probes each upper
        an overlay of the session ever used (manager/fs/overlay_inuse.py), not those the
        host's mounts suggest at commit (a mount gone meanwhile hid a level's: attack pass 18)."""
        if point in self.overlaid:
            return
        self.overlaid.add(point)
        fd = os.open(self.sandbox / names.OVERLAID, os.O_WRONLY | os.O_APPEND | os.O_CREAT
                     | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, os.fsencode(point) + b"\0")
        finally:
            os.close(fd)

    def socket_dirs(self) -> list[str]:
        """Where a daemon that starts later would make its socket: the roots, and the
        directories of the sockets bound now."""
        bound = [os.path.dirname(p) for p in self.binds if levels.is_socket(p)]
        return sorted({*(r for r in SOCKET_ROOTS if os.path.isdir(r)), *bound})

    def bind(self, point: str) -> None:
        error = run_mount("--rbind", point, str(self.at(self.root, point)))
        if error:
            self.log.append(f"{point}: bind failed: {error}")

    def readonly_bind(self, point: str, why: str) -> None:
        # Never let writes escape: a directory we cannot overlay is read-only inside.
        target = str(self.at(self.root, point))
        error = run_mount("--rbind", point, target)
        if error is None:
            error = run_mount("-o", "remount,bind,ro", target)
            if error is not None:
                subprocess.run(["umount", "-l", target], capture_output=True)
        state = "read-only" if error is None else f"hidden (empty): {error}"
        self.log.append(f"{point}: not overlaid ({why}); {state} inside the sandbox")

    def private_shm(self) -> None:
        shm = str(self.at(self.root, "/dev/shm"))
        if os.path.isdir(shm):
            run_mount("-t", "tmpfs", "-o", "mode=1777,nosuid,nodev", "tmpfs", shm)


def _chown_like(path: Path, st: os.stat_result) -> None:
    """The real owner (see :func:`_like`), of an entry the holder staged itself."""
    try:
        os.lchown(path, st.st_uid, st.st_gid)
    except OSError:
        with contextlib.suppress(OSError):
            os.lchown(path, 0, 0)


def _like(fd: int, st: os.stat_result) -> None:
    """The real directory's mode, and its owner; one this namespace does not map reads as
    the namespace's root (root's directories show as root's: /, /tmp; they may be the
    user's on disk between holders, see hand_back)."""
    os.fchmod(fd, st.st_mode & 0o7777)
    try:
        os.fchown(fd, st.st_uid, st.st_gid)
    except OSError:
        with contextlib.suppress(OSError):
            os.fchown(fd, 0, 0)


def listening_sockets() -> frozenset[str]:
    """The paths unix sockets listen on (this network namespace), symlinks resolved."""
    paths = set()
    try:
        with open("/proc/net/unix", encoding="utf-8", errors="replace") as f:
            next(f, None)
            for line in f:
                fields = line.split(maxsplit=7)
                # Flags 00010000: accepting connections; a path, not an abstract name.
                if len(fields) == 8 and int(fields[3], 16) & 0x10000 and fields[7].startswith("/"):
                    paths.add(os.path.realpath(fields[7].rstrip("\n")))
    except (OSError, ValueError):
        pass
    return frozenset(paths)


def sockets_below(directory: str) -> list[str]:
    """Sockets at most SOCKET_DEPTH levels below ``directory`` (a bounded look).

    The caller binds only live ones: a bound socket is a mount point inside, which `rm`
    refuses (EBUSY), and removing a stale socket before binding a new one is common.
    """
    found: list[str] = []
    level, budget = [directory], SOCKET_SCAN_LIMIT
    for _ in range(SOCKET_DEPTH):
        below: list[str] = []
        for parent in level:
            try:
                entries = list(os.scandir(parent))[:max(budget, 0)]
            except OSError:
                continue
            budget -= len(entries)
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.is_dir(follow_symlinks=False):
                        below.append(entry.path)
                    elif not (entry.is_file(follow_symlinks=False) or entry.is_symlink()) \
                            and stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode):
                        found.append(entry.path)  # d_type told it is neither: one lstat
        level = below
    return found




def _foreign_on_the_way(directory: str) -> bool:
    """Whether a directory on the way to ``directory`` belongs to an unmapped user or group."""
    path = Path(directory)
    try:
        return any(st.st_uid == OVERFLOW_ID or st.st_gid == OVERFLOW_ID
                   for st in (os.stat(p) for p in [*reversed(path.parents), path]))
    except OSError:
        return False


def _copy(real: str, copy: Path) -> bool:
    try:
        shutil.copy2(real, copy)
        return True
    except OSError:
        copy.unlink(missing_ok=True)
        return False


