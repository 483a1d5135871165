"""The namespace holder of the built-in overlay engine.

Started as ``python3 -I overlay_holder.py SANDBOX IDLE_SECONDS PROJECT``. It makes its
own user and mount namespaces, says ``userns`` and waits for the launcher to write
their id maps (:mod:`manager.engines.overlay_ids`: with ``newuidmap`` an ordinary
user cannot write them itself) and answer ``go``; then it becomes the namespace's
root, which only this machinery needs (calls run as the user's own uid). It mounts the whole
filesystem as overlays under ``SANDBOX/temproot`` (try's layout: writes land in
``SANDBOX/upperdir/<absolute path>``), pivots its root there (the host's detached: see
:func:`pivot`) and then waits, so that each
call only has to enter its namespaces (a few milliseconds) instead of building
them (try: ~200 ms). It says ``ready`` or ``error: ...`` on stdout, once.

It exits when the session directory disappears or after IDLE_SECONDS without a
call while nothing else runs in its mount namespace.
"""

from __future__ import annotations

import collections
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
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from manager.engines.overlay_watch import LevelWatch
    from manager.engines.overlay_watch import Watch

PASSTHROUGH = ("/proc", "/sys", "/dev")
POLL_SECONDS = 30.0
STALE_POLL = 0.1       # while calls still run in a stale holder
HOLDER_PID = "holder.pid"
# A call asks to see the latest state: it writes a line (its nonce) to SYNC_REQUEST, the
# holder brings the snapshotted directories up to date and writes the nonces it served
# (and why it failed, if it did) to SYNC_DONE, which the call polls, sleeping on
# SYNC_SLEEP (a fifo nobody writes).
SYNC_REQUEST = "sync.req"
SYNC_SLEEP = "sync.sleep"
SYNC_DONE = "sync.done"
# Present while changes wait to be shown. A call may skip the round trip when the holder
# sleeps in select() (an inotify event wakes it during the writer's own system call, so
# asleep means every change so far has been drained) and this file is absent.
SYNC_DIRTY = "sync.dirty"
SERVED_KEPT = 64
RETIRED = "retired"     # SYNC_DONE's reason when the call must start a fresh holder
OVERFLOW_ID = 65534  # what an id without a mapping in this user namespace reads as
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
ORPHAN_POLL = 0.2   # how soon the session's init ends what a finished call left
SESSION_INIT = 0   # the host pid of the session's pid namespace's init, once started
INIT_JOIN = -1     # a word on it moves the init into the sandbox's mount namespace


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

    Each such directory is watched (``levels``), so that a call can ask for the
    snapshot to be brought up to date (``overlay_levels.refresh``).
    """

    def __init__(self, sandbox: Path, watch: LevelWatch | None = None) -> None:
        self.watch = watch
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

    def rebase(self, sandbox: Path, real_prefix: str = "") -> None:
        """Paths as the holder reaches them (after its pivot: through /proc/self/fd)."""
        self.sandbox = sandbox
        self.upper = sandbox / "upperdir"
        self.work = sandbox / "workdir"
        self.root = sandbox / "temproot"
        self.skeleton = sandbox / "skeleton"
        self.staging = sandbox / "skeleton.new"
        self.real_prefix = real_prefix

    def build(self, project: str = "") -> None:
        for d in (self.upper, self.work, self.root, self.skeleton, self.staging):
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
        error = _mount("--bind", target, target) or _mount("-o", "remount,bind,ro", target)
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
        level is mounted, large files read-only). A new version of a file replaces the old
        one by rename, so a mount still reading the old one reads it whole."""
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
        work = self.work / hashlib.sha256(point.encode()).hexdigest()[:16]
        work.mkdir(exist_ok=True)
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
        work = self.work_dir(point)
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
            st = os.stat(self.real_prefix + real)
            os.chmod(current, st.st_mode & 0o7777)
            _chown_like(current, st)
        root = os.stat(self.real_prefix + "/")
        os.chmod(self.upper, root.st_mode & 0o7777)
        _chown_like(self.upper, root)
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
        os.lchown(path, st.st_uid, st.st_gid)
    except OSError:
        with contextlib.suppress(OSError):
            os.lchown(path, 0, 0)


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
    walk = _watch_module().walk   # a loop: the sandbox's tree may be thousands deep
    for top in (sandbox / "workdir", *([sandbox / "skeleton"] if skeleton else [])):
        for dirpath, dirnames, filenames in walk(str(top)):
            mine.append(Path(dirpath))
            mine.extend(Path(dirpath, n) for n in (*dirnames, *filenames)
                        if not os.path.isdir(os.path.join(dirpath, n)))
    for path in mine:
        with contextlib.suppress(OSError):
            os.lchown(path, uid, gid)
    for dirpath, _, filenames in walk(str(upper)):   # whiteouts: overlayfs's own, as its mounter
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
    return bool(_namespace_members(first=True))


def _namespace_members(first: bool = False) -> list[str]:
    """Pids of the other processes in this user namespace (as /proc names them), but the
    holder's own children: the session's init and the holder's passing mount helpers."""
    mine = os.readlink("/proc/self/ns/user")
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if os.readlink(f"/proc/{entry}/ns/user") == mine and \
                        parent_of(int(entry)) != os.getpid():
                    found.append(entry)
                    if first:
                        break
            except OSError:
                continue
    return found


def parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def start_init() -> None:
    """pid 1 of the session's pid namespace, which every call joins: a later call sees and
    signals what an earlier one still runs (a server started in the background), as outside.
    What a call leaves behind when it ends or is killed is orphaned to this init, which ends
    it, as a pid namespace per call did: nothing outlives its call unseen. It dies with the
    holder, taking the namespace along. Started before the sandbox exists (it must be the
    first child), it moves into the sandbox's mount namespace when the holder has pivoted
    (:func:`init_join`): a call sees it, and a command that is root in the namespace could
    otherwise take its root (/proc/1/root) or namespace (setns) as a way to the host's."""
    import ctypes

    global SESSION_INIT, INIT_JOIN
    holder = os.getpid()
    alive_read, _alive_write = os.pipe()   # the holder keeps the write end until it exits
    join_read, INIT_JOIN = os.pipe()
    pid = os.fork()
    if pid:
        os.close(alive_read)
        os.close(join_read)
        SESSION_INIT = pid
        return
    try:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)   # SIGKILL
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        keep = sorted((alive_read, join_read))
        os.closerange(3, keep[0])
        os.closerange(keep[0] + 1, keep[1])
        os.closerange(keep[1] + 1, 1 << 16)
        os.chdir("/")
        _join_sandbox(holder, join_read)
        _end_orphans(alive_read)
    finally:
        os._exit(0)


def _join_sandbox(holder: int, join_read: int) -> None:
    """Wait for the holder's word, then enter its (pivoted) mount namespace; its root and
    working directory become the sandbox's. Nothing to join (the holder failed): exit."""
    import ctypes

    if os.read(join_read, 1) != b"j":
        os._exit(0)
    os.close(join_read)
    fd = os.open(f"/proc/{holder}/ns/mnt", os.O_RDONLY)
    if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNS) != 0:
        os._exit(1)   # the holder sees its init gone and does not say ready
    os.close(fd)
    os.chdir("/")


def init_join() -> None:
    """Move the session's init into the holder's mount namespace, and wait until it is there."""
    os.write(INIT_JOIN, b"j")
    os.close(INIT_JOIN)
    mine = os.readlink("/proc/self/ns/mnt")
    deadline = time.monotonic() + 10
    while _readlink(f"/proc/{SESSION_INIT}/ns/mnt") != mine:
        if init_gone() or time.monotonic() > deadline:
            raise RuntimeError("the session's init could not enter the sandbox's mount namespace")
        time.sleep(0.001)


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def _end_orphans(holder_alive: int) -> None:
    """This init starts nothing, so each child it has is an orphan of a call: end it (its
    own children follow on the next rounds), reap the dead, until the holder is gone."""
    while True:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        for host_pid in _children():
            with contextlib.suppress(OSError):
                os.kill(_pid_inside(host_pid), 9)
        if select.select([holder_alive], [], [], ORPHAN_POLL)[0]:
            return


def _children() -> list[int]:
    """This process's children, as host pids (its /proc is the host's)."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children", encoding="ascii") as f:
                found += map(int, f.read().split())
    return found


def _pid_inside(host_pid: int) -> int:
    """The pid in the innermost pid namespace (this init's) of a host pid."""
    with open(f"/proc/{host_pid}/status", encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    raise OSError(f"no NSpid for {host_pid}")


def init_gone() -> bool:
    try:
        return SESSION_INIT != 0 and os.waitpid(SESSION_INIT, os.WNOHANG)[0] != 0
    except ChildProcessError:
        return True


class Sync:
    """The holder's side of a call's request to see the latest state (see SYNC_REQUEST)."""

    def __init__(self, sandbox: Path) -> None:
        owner = os.stat(sandbox)
        for name in (SYNC_REQUEST, SYNC_SLEEP):
            (sandbox / name).unlink(missing_ok=True)
            os.mkfifo(sandbox / name, 0o600)
            # The calls open them as the user, whose uid is not this namespace's root
            # when subordinate ids are mapped (its root owns what it makes).
            os.chown(sandbox / name, owner.st_uid, owner.st_gid)
        # Read-write, so that it never sees end-of-file.
        self.requests = os.open(sandbox / SYNC_REQUEST, os.O_RDWR | os.O_NONBLOCK)
        (sandbox / SYNC_DONE).write_text("\n\n")
        os.chmod(sandbox / SYNC_DONE, 0o644)
        (sandbox / SYNC_DIRTY).touch()   # until the first answer: changes made while building
        self.pending: dict[str, set[str]] = {}
        # Several rounds' worth, so that a call that looks late still finds its nonce.
        self.served: collections.deque[str] = collections.deque(maxlen=SERVED_KEPT)
        self.broken = ""   # a swap that failed half-way: only a fresh holder is trustworthy

    def nonces(self) -> list[str]:
        data = b""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self.requests, 65536):
                data += chunk
        return data.decode(errors="replace").split()

    def collect(self, builder: Builder, session_fd: int) -> None:
        """Drain the level watch; mark the state dirty (before sleeping again) if it changed."""
        if builder.watch is None:
            return
        for level, names in builder.watch.drain().items():
            self.pending.setdefault(level, set()).update(names)
        if self.pending:
            os.close(os.open(SYNC_DIRTY, os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=session_fd))

    def serve(self, builder: Builder, session_fd: int) -> bool:
        """Answer the calls waiting; True when the holder has retired (they start a new one)."""
        nonces = self.nonces()
        if not nonces:
            return False
        self.collect(builder, session_fd)
        why = self.bring_up_to_date(builder, session_fd) if self.pending else ""
        if not self.pending:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(SYNC_DIRTY, dir_fd=session_fd)
        self.answer(session_fd, nonces, why)
        return why == RETIRED

    def bring_up_to_date(self, builder: Builder, session_fd: int) -> str:
        # "/" is the holder's own root, which cannot be swapped under it: a fresh holder.
        failure = self.broken or ("" if "/" not in self.pending else "a new sandbox is needed to show it")
        refresh = _levels_module().refresh
        builder.live = None   # listening sockets: as they are now
        for level in sorted(self.pending, key=lambda d: d.count("/")):
            if failure:
                break
            try:
                refresh(builder, level, self.pending[level])
            except (OSError, RuntimeError) as exc:
                failure = self.broken = f"{level}: {exc}"
            else:
                del self.pending[level]
        if builder.scaffold:
            _record_scaffold(builder.sandbox, builder.scaffold)
        _append_log(builder, session_fd)
        if not failure:
            return ""
        print(f"cannot bring {', '.join(sorted(self.pending))} up to date: {failure}", file=sys.stderr,
              flush=True)
        busy = _namespace_members()
        if not busy:
            _retire(session_fd)
            return RETIRED
        return (f"{', '.join(sorted(self.pending))} changed outside the sandbox and cannot be shown "
                f"while commands still run in it ({failure}): run the command again when they have "
                f"ended, or stop them (pids {', '.join(busy)})")

    def answer(self, session_fd: int, nonces: list[str], why: str) -> None:
        tmp = SYNC_DONE + ".tmp"
        # 0644: the calls read it as the user, who is not this namespace's root when
        # subordinate ids are mapped (it holds nonces only).
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=session_fd)
        self.served.extend(nonces)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"{' '.join(self.served)}\n{why.replace(chr(10), ' ')}\n")
        os.replace(tmp, SYNC_DONE, src_dir_fd=session_fd, dst_dir_fd=session_fd)


def wait(session_fd: int, idle_seconds: float, watch: Watch | None, sync: Sync, builder: Builder) -> None:
    """Until the session is gone, idle, or stale (the real project changed); answering calls."""
    poll = min(POLL_SECONDS, max(idle_seconds / 2, 0.5))
    stale = False
    while True:
        levels = [builder.watch.fd] if builder.watch is not None else []
        readable = [sync.requests, *levels, *([watch.fd] if watch and not stale else [])]
        ready, _, _ = select.select(readable, [], [], STALE_POLL if stale else poll)
        if sync.requests in ready and sync.serve(builder, session_fd):
            return
        if levels and levels[0] in ready:
            sync.collect(builder, session_fd)
        if watch is not None and watch.fd in ready:
            stale = watch.drain() or stale
        st = os.fstat(session_fd)
        if st.st_nlink == 0:
            return
        if init_gone():   # no call could enter the pid namespace: a fresh holder
            _retire(session_fd)
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


def _own_directory() -> None:
    # Run as a script with -I, the holder has only its own directory to import from.
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)


def _watch_module() -> ModuleType:
    _own_directory()
    import overlay_watch  # type: ignore[import-not-found,unused-ignore]

    module: ModuleType = overlay_watch
    return module


def _watch_class() -> type[Watch]:
    cls: type[Watch] = _watch_module().Watch
    return cls


def _append_log(builder: Builder, session_fd: int, first: bool = False) -> None:
    """What the build (``first``: a new mount.log) or a refresh since logged, in mount.log.
    Through the session directory's descriptor: after the pivot it has no path here."""
    lines = builder.log[builder.logged:]
    if not (lines or first):
        return
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_TRUNC if first else os.O_APPEND)
    try:
        fd = os.open("mount.log", flags, 0o644, dir_fd=session_fd)
    except OSError as exc:
        print(f"cannot write mount.log: {exc}", file=sys.stderr, flush=True)
        return
    with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as out:
        out.write("".join(line + "\n" for line in lines))
    builder.logged = len(builder.log)


def _level_watch(log: list[str]) -> LevelWatch | None:
    _own_directory()
    import overlay_watch  # type: ignore[import-not-found,unused-ignore]

    try:
        watch: LevelWatch = overlay_watch.LevelWatch()
    except OSError as exc:
        log.append(f"cannot watch for outside changes ({exc}); directories with mounts below them "
                   "are shown as they were when the sandbox started")
        return None
    return watch


def _egress_module() -> ModuleType:
    _own_directory()
    import egress_proxy  # type: ignore[import-not-found,unused-ignore]

    module: ModuleType = egress_proxy
    return module


def _levels_module() -> ModuleType:
    _own_directory()
    import overlay_levels  # type: ignore[import-not-found,unused-ignore]

    module: ModuleType = overlay_levels
    return module


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


# pivot_root has no libc wrapper; its number per architecture (the binary otherwise).
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "loongarch64": 41,
                  "ppc64le": 203, "ppc64": 203, "s390x": 217, "i686": 217, "armv7l": 218}
MNT_DETACH = 2


def pivot(root: Path) -> int:
    """Make ``root`` this process's root in a mount namespace of its own, with the host's
    root detached from it: a command that is root in the namespace can chroot and walk
    ``..`` as it likes, it stays in the sandbox (a chroot over the still-mounted host's root
    would let it out). The host's namespace stays open (returned): the holder reads the
    real files through descriptors opened before, and makes the mounts of a refresh there
    (``overlay_levels.host_view``)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    host_ns = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)

    def check(result: int, what: str) -> None:
        if result != 0:
            raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")

    check(libc.unshare(CLONE_NEWNS), "unshare")
    os.chdir(root)
    number = SYS_PIVOT_ROOT.get(os.uname().machine)
    if number is not None:
        check(libc.syscall(number, b".", b"."), f"pivot_root {root}")
    else:
        tool = shutil.which("pivot_root", path="/usr/sbin:/sbin:/usr/bin:/bin")
        if tool is None or subprocess.run([tool, ".", "."], capture_output=True).returncode != 0:
            raise OSError(f"pivot_root {root} failed")
    check(libc.umount2(b".", MNT_DETACH), "detach the host's root")
    os.chdir("/")
    return host_ns


def enter_namespaces(pid_namespace: bool = False, net_namespace: bool = False) -> None:
    """New user and mount namespaces (and a pid namespace for this process's children),
    mapped by the launcher; then their root."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    flags = CLONE_NEWUSER | CLONE_NEWNS | (CLONE_NEWPID if pid_namespace else 0)
    flags |= CLONE_NEWNET if net_namespace else 0   # setting `network` (egress_proxy)
    if libc.unshare(flags) != 0:
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
    if pid_namespace:
        start_init()   # the first child is pid 1: before any helper process runs
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
    log: list[str] = []
    builder = Builder(sandbox, _level_watch(log))
    builder.log = log
    try:
        network = _egress_module().HolderNetwork(str(sandbox))   # network: before the namespaces
        enter_namespaces(pid_namespace=True, net_namespace=network.isolated)
        network.inside()
        builder.build(project)
        _levels_module()   # before the pivot, which hides this directory
        sync = Sync(sandbox)
    except Exception as exc:  # noqa: BLE001 - reported to the launcher, which raises
        print(f"error: {exc}", flush=True)
        return 1
    watch = _watch(project, builder.log)
    if watch is not None:
        watch.add_socket_dirs(builder.socket_dirs())
    session_fd = os.open(sandbox, os.O_RDONLY | os.O_DIRECTORY)
    _append_log(builder, session_fd, first=True)
    _record_scaffold(sandbox, builder.scaffold)
    real_root = os.open("/", os.O_PATH | os.O_DIRECTORY)
    os.chmod(builder.root, os.stat("/").st_mode & 0o7777)
    try:
        builder.host_ns = pivot(builder.root)
        builder.own_ns = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        init_join()
    except (OSError, RuntimeError) as exc:
        print(f"error: {exc}", flush=True)
        return 1
    builder.rebase(Path(f"/proc/self/fd/{session_fd}"), f"/proc/self/fd/{real_root}")
    try:
        network.serve(session_fd)   # network: the forwarder to the proxy, the calls' state
    except (OSError, RuntimeError) as exc:
        print(f"error: network: {exc}", flush=True)
        return 1
    print("ready", flush=True)
    sys.stdout.close()
    os.close(1)
    wait(session_fd, idle_seconds, watch, sync, builder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
