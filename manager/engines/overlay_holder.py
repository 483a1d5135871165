"""The namespace holder of the built-in overlay engine.

Started as ``python3 -I overlay_holder.py SANDBOX IDLE_SECONDS PROJECT``. It makes its
own user and mount namespaces, says ``userns`` and waits for the launcher to write
their id maps (:mod:`manager.engines.overlay_ids`: with ``newuidmap`` an ordinary
user cannot write them itself) and answer ``go``; then it becomes the namespace's
root, which only this machinery needs (calls run as the user's own uid). It mounts the whole
filesystem as overlays under ``SANDBOX/temproot`` (try's layout: writes land in
``SANDBOX/upperdir/<absolute path>``), chroots there and then waits, so that each
call only has to enter its namespaces (a few milliseconds) instead of building
them (try: ~200 ms). It says ``ready`` or ``error: ...`` on stdout, once.

It exits when the session directory disappears or after IDLE_SECONDS without a
call while nothing else runs in its mount namespace.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import select
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from manager.engines.overlay_watch import Watch

PASSTHROUGH = ("/proc", "/sys", "/dev")
POLL_SECONDS = 30.0
STALE_POLL = 0.1       # while calls still run in a stale holder
HOLDER_PID = "holder.pid"
OVERFLOW_ID = 65534  # what an id without a mapping in this user namespace reads as
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
PR_SET_DUMPABLE = 4


def mount_points() -> list[tuple[str, str]]:
    """(mount point, fs type) for every mount, parents before children."""
    points: dict[str, str] = {}
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            points[_unescape(fields[4])] = fields[sep + 1]
    return sorted(points.items(), key=lambda item: (item[0].count("/"), item[0]))


def _unescape(field: str) -> str:
    return field.encode().decode("unicode_escape").encode("latin-1").decode("utf-8", "replace")


def _mount(*args: str) -> str | None:
    proc = subprocess.run(["mount", *args], capture_output=True, text=True)
    return None if proc.returncode == 0 else (proc.stderr.strip() or f"mount exited {proc.returncode}")


SKELETON_FILE_LIMIT = 1 << 20
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
    """

    def __init__(self, sandbox: Path) -> None:
        self.sandbox = sandbox
        self.upper = sandbox / "upperdir"
        self.work = sandbox / "workdir"
        self.root = sandbox / "temproot"
        self.skeleton = sandbox / "skeleton"
        self.log: list[str] = []
        self.mounts: list[str] = []
        self.binds: list[str] = []
        self.scaffold: list[str] = []
        self.live: frozenset[str] | None = None   # listening_sockets(), read when needed

    def build(self, project: str = "") -> None:
        for d in (self.upper, self.work, self.root, self.skeleton):
            d.mkdir(exist_ok=True)
        self.mounts = [p for p, _ in mount_points()]
        if project and _foreign_on_the_way(project):
            # overlayfs cannot copy up a directory whose owner has no id in this user
            # namespace (EOVERFLOW): without these nothing could be written in the project.
            with contextlib.suppress(OSError):
                self.make_upper(project)
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
        entries = self.fill_skeleton(directory, names, skeleton)
        error = self.overlay(directory, lower=str(skeleton))
        if error:
            raise RuntimeError(f"cannot overlay {directory}: {error}")
        for name in entries:
            with contextlib.suppress(FileNotFoundError):
                self.entry(os.path.join(directory, name))

    def unreadable(self, directory: str) -> None:
        """A directory this user cannot list (e.g. /run/docker, 0700, while a container runs).

        Shown as the user sees it: present, its contents out of reach (its parent's
        skeleton holds it empty). Read-only, so that nothing is written where commit
        could never put it.
        """
        target = str(self.at(self.root, directory))
        error = _mount("--bind", target, target) or _mount("-o", "remount,bind,ro", target)
        state = "empty and read-only" if error is None else f"empty ({error})"
        self.log.append(f"{directory}: not readable by this user; {state} inside the sandbox")

    def fill_skeleton(self, directory: str, names: list[str], skeleton: Path) -> list[str]:
        subdirs = []
        for name in names:
            try:
                if self.skeleton_entry(os.path.join(directory, name), skeleton / name):
                    subdirs.append(name)
            except FileNotFoundError:
                continue  # removed while we looked (other processes keep working)
        os.chmod(skeleton, os.stat(directory).st_mode & 0o7777)
        return subdirs

    def skeleton_entry(self, real: str, copy: Path) -> bool:
        """Mirror one entry into the skeleton; True for a directory to overlay next."""
        if os.path.islink(real):
            copy.unlink(missing_ok=True)
            os.symlink(os.readlink(real), copy)
            return False
        if os.path.isdir(real):
            copy.mkdir(exist_ok=True)
            os.chmod(copy, os.stat(real).st_mode & 0o7777)
            return True
        if self.stale_socket(real):
            # No daemon behind it: a socket of its own, which `rm` can remove (a bound one
            # is a mount point: EBUSY).
            copy.unlink(missing_ok=True)
            os.mknod(copy, stat.S_IFSOCK | (os.lstat(real).st_mode & 0o7777))
            return False
        if not (os.path.isfile(real) and os.path.getsize(real) <= SKELETON_FILE_LIMIT
                and _copy(real, copy)):
            # Sockets, fifos, devices and large files: bound over a placeholder
            # once the level is mounted (large files read-only).
            copy.touch()
            self.binds.append(real)
        return False

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
            error = _mount("--bind", real, target)
            if error is None and os.path.isfile(real):
                error = _mount("-o", "remount,bind,ro", target)
                if error is not None:
                    subprocess.run(["umount", "-l", target], capture_output=True)
            if error is not None:
                self.log.append(f"{real}: cannot bind ({error}); an empty file in the sandbox")

    def entry(self, path: str) -> None:
        if path in PASSTHROUGH:
            self.bind(path)  # recursive: covers /dev/pts, /sys/fs/cgroup, ...
        elif self.has_mounts_below(path):
            self.level(path)
        else:
            error = self.overlay(path, lower=path)
            if error:
                self.readonly_bind(path, error)
            elif any(path == r or path.startswith(r + "/") for r in SOCKET_ROOTS):
                self.binds.extend(p for p in sockets_below(path) if not self.stale_socket(p))

    def overlay(self, point: str, lower: str) -> str | None:
        if any(c in p for p in (point, lower) for c in ",:"):
            return "path has ',' or ':' (overlayfs option syntax)"
        upper = self.make_upper(point)
        work = self.work / hashlib.sha256(point.encode()).hexdigest()[:16]
        work.mkdir(exist_ok=True)
        options = f"userxattr,index=off,lowerdir={lower},upperdir={upper},workdir={work}"
        return _mount("-t", "overlay", "overlay", "-o", options, str(self.at(self.root, point)))

    def make_upper(self, point: str) -> Path:
        """The upper directory for ``point``, each level with the real one's mode and owner.

        An overlay's root directory takes its attributes from the upper layer, so
        /tmp must keep 1777 and /root 0700. These directories are scaffolding,
        recorded so that review does not list them as changes.
        """
        current, real = self.upper, "/"
        for part in [p for p in point.split("/") if p]:
            current, real = current / part, os.path.join(real, part)
            if not current.exists():
                current.mkdir()
                self.scaffold.append(real)
            st = os.stat(real)
            os.chmod(current, st.st_mode & 0o7777)
            _chown_like(current, st)
        os.chmod(self.upper, os.stat("/").st_mode & 0o7777)
        _chown_like(self.upper, os.stat("/"))
        return current

    def socket_dirs(self) -> list[str]:
        """Where a daemon that starts later would make its socket: the roots, and the
        directories of the sockets bound now."""
        bound = [os.path.dirname(p) for p in self.binds if _is_socket(p)]
        return sorted({*(r for r in SOCKET_ROOTS if os.path.isdir(r)), *bound})

    def bind(self, point: str) -> None:
        error = _mount("--rbind", point, str(self.at(self.root, point)))
        if error:
            self.log.append(f"{point}: bind failed: {error}")

    def readonly_bind(self, point: str, why: str) -> None:
        # Never let writes escape: a directory we cannot overlay is read-only inside.
        target = str(self.at(self.root, point))
        error = _mount("--rbind", point, target)
        if error is None:
            error = _mount("-o", "remount,bind,ro", target)
            if error is not None:
                subprocess.run(["umount", "-l", target], capture_output=True)
        state = "read-only" if error is None else f"hidden (empty): {error}"
        self.log.append(f"{point}: not overlaid ({why}); {state} inside the sandbox")

    def private_shm(self) -> None:
        shm = str(self.at(self.root, "/dev/shm"))
        if os.path.isdir(shm):
            _mount("-t", "tmpfs", "-o", "mode=1777,nosuid,nodev", "tmpfs", shm)


def _chown_like(path: Path, st: os.stat_result) -> None:
    """The real owner; one this namespace does not map reads as the namespace's root
    (root's directories show as root's: /, /tmp; they may be the user's on disk between
    holders, see hand_back)."""
    try:
        os.chown(path, st.st_uid, st.st_gid)
    except OSError:
        with contextlib.suppress(OSError):
            os.chown(path, 0, 0)


def hand_back(sandbox: Path, uid: int, gid: int, skeleton: bool) -> None:
    """Give the machinery's own entries (scaffolding, work directories, whiteouts; with
    ``skeleton``, for the sandbox's removal, the skeleton too: it is the next holder's lower
    layer, root's inside) to the user on disk, so that the user's commit, discard and removal
    can change them. Entries a command made keep their owners: review shows them."""
    upper = sandbox / "upperdir"
    try:
        scaffold = json.loads((sandbox / "scaffold.json").read_text())
    except (OSError, ValueError):
        scaffold = []
    mine = [upper, *(Path(str(upper) + p) for p in scaffold)]
    for top in (sandbox / "workdir", *([sandbox / "skeleton"] if skeleton else [])):
        for dirpath, dirnames, filenames in os.walk(top):
            mine.append(Path(dirpath))
            mine.extend(Path(dirpath, n) for n in (*dirnames, *filenames)
                        if not os.path.isdir(os.path.join(dirpath, n)))
    for path in mine:
        with contextlib.suppress(OSError):
            os.lchown(path, uid, gid)
    for dirpath, _, filenames in os.walk(upper):   # whiteouts: overlayfs's own, as its mounter
        for name in filenames:
            entry = os.path.join(dirpath, name)
            with contextlib.suppress(OSError):
                st = os.lstat(entry)
                if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                    os.lchown(entry, uid, gid)


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


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except OSError:
        return False


def _foreign_on_the_way(directory: str) -> bool:
    """Whether a directory on the way to ``directory`` belongs to an unmapped user or group."""
    path = Path(directory)
    try:
        return any(st.st_uid == OVERFLOW_ID or st.st_gid == OVERFLOW_ID
                   for st in (os.stat(p) for p in [*reversed(path.parents), path]))
    except OSError:
        return False


def others_in_namespace() -> bool:
    mine = os.readlink("/proc/self/ns/user")
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if os.readlink(f"/proc/{entry}/ns/user") == mine:
                    return True
            except OSError:
                continue
    return False


def wait(session_fd: int, idle_seconds: float, watch: Watch | None) -> None:
    """Until the session is gone, idle, or stale (the real project changed)."""
    poll = min(POLL_SECONDS, max(idle_seconds / 2, 0.5))
    stale = False
    while True:
        readable = [watch.fd] if watch and not stale else []
        if readable:
            ready, _, _ = select.select(readable, [], [], poll)
            stale = bool(ready) and watch is not None and watch.drain()
        else:
            time.sleep(STALE_POLL if stale else poll)
        st = os.fstat(session_fd)
        if st.st_nlink == 0:
            return
        if stale and not others_in_namespace():
            _retire(session_fd)
            return
        try:
            last = os.stat("last-used", dir_fd=session_fd).st_mtime
        except FileNotFoundError:
            last = st.st_mtime
        if time.time() - last > idle_seconds and not others_in_namespace():
            return


def _retire(session_fd: int) -> None:
    """Stop new calls from entering (they start a fresh holder) before exiting."""
    try:
        with open(HOLDER_PID, encoding="ascii", opener=lambda p, f: os.open(p, f, dir_fd=session_fd)) as f:
            mine = f.read().split()[:1] == [str(os.getpid())]
        if mine:
            os.unlink(HOLDER_PID, dir_fd=session_fd)
    except (OSError, ValueError):
        pass


def _watch_class() -> type[Watch]:
    # Run as a script with -I, the holder has only its own directory to import from.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import overlay_watch  # type: ignore[import-not-found,unused-ignore]

    cls: type[Watch] = overlay_watch.Watch
    return cls


def _watch(project: str, log: list[str]) -> Watch | None:
    if not project or not os.path.isdir(project):
        return None
    try:
        watch = _watch_class()(project)
        watch.add_tree()
    except OSError as exc:
        log.append(f"{project}: cannot watch for outside changes ({exc}); restart the session "
                   "(workspace discard or SessionEnd) to see them")
        return None
    if not watch.complete:
        log.append(f"{project}: watching the first {watch.count} directories for outside changes")
    return watch


def _copy(real: str, copy: Path) -> bool:
    try:
        shutil.copy2(real, copy)
        return True
    except OSError:
        copy.unlink(missing_ok=True)
        return False


def _record_scaffold(sandbox: Path, created: list[str]) -> None:
    path = sandbox / "scaffold.json"
    try:
        known = set(json.loads(path.read_text()))
    except (OSError, ValueError):
        known = set()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(sorted(known | set(created))))
    os.replace(tmp, path)


def enter_namespaces() -> None:
    """New user and mount namespaces, mapped by the launcher; then their root."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), f"unshare: {os.strerror(ctypes.get_errno())}")
    print("userns", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise RuntimeError("the launcher did not map this namespace's ids")
    if os.getuid() != 0:   # the user's own uid maps to itself: root is a subordinate id
        os.setresgid(0, 0, 0)
        os.setresuid(0, 0, 0)
        # A changed uid makes the process undumpable, and its /proc/PID/ns and root
        # unreachable for the user's calls: they must reach them.
        libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    error = _mount("--make-rprivate", "/")   # as `unshare --mount` does
    if error:
        raise RuntimeError(f"mount --make-rprivate /: {error}")


def main(argv: list[str]) -> int:
    if argv[0] == "--hand-back":   # SANDBOX UID GID [skeleton], mapped as the holder's was
        try:
            enter_namespaces()
            hand_back(Path(argv[1]), int(argv[2]), int(argv[3]), argv[4:] == ["skeleton"])
        except Exception as exc:  # noqa: BLE001 - reported to the launcher
            print(f"error: {exc}", flush=True)
            return 1
        print("ready", flush=True)
        return 0
    sandbox = Path(argv[0])
    idle_seconds = float(argv[1])
    project = argv[2] if len(argv) > 2 else ""
    builder = Builder(sandbox)
    try:
        enter_namespaces()
        builder.build(project)
    except Exception as exc:  # noqa: BLE001 - reported to the launcher, which raises
        print(f"error: {exc}", flush=True)
        return 1
    watch = _watch(project, builder.log)
    if watch is not None:
        watch.add_socket_dirs(builder.socket_dirs())
    (sandbox / "mount.log").write_text("".join(line + "\n" for line in builder.log))
    _record_scaffold(sandbox, builder.scaffold)
    session_fd = os.open(sandbox, os.O_RDONLY | os.O_DIRECTORY)
    os.chmod(builder.root, os.stat("/").st_mode & 0o7777)
    os.chroot(builder.root)
    os.chdir("/")
    print("ready", flush=True)
    sys.stdout.close()
    os.close(1)
    wait(session_fd, idle_seconds, watch)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
