"""Carry out commit steps on the real filesystem, crash-safely and without following symlinks.

Every real path is always either its old or its new entry:

* A file, symlink or special file arrives by one ``rename`` of a copy: it is
  copied to a temporary name beside its destination first, and the upper entry
  is removed after. Never the upper entry itself: an overlay of the sandbox
  still alive (a descriptor a command handed to a process outside the session)
  reaches the inode its upper entry is, wherever that inode is renamed to, so a
  real file that *is* an upper inode could be written after commit (attack
  passes 16 and 18). What becomes real is a fresh inode, which no overlay ever
  exposed.
* A directory tree leaves by a rename to a temporary name, then is deleted.
* Type changes (file <-> directory) cannot be one rename: the old entry goes,
  then the new one arrives; a crash in between leaves the path missing until the
  commit is resumed, which finishes it.

Durability (power loss, not just a killed process). fsync per file is what
makes ``cp``-style commits slow: one disk flush each. The guarantee only needs
each file's data to be on disk before the rename that publishes it, and each
rename to be on disk before the upper copy it replaces is deleted. So the steps
run in batches: the upper filesystem is synced once before anything moves
(moved files' data is then durable), each batch's temporary copies are written,
the destination filesystem is synced once (``syncfs``), the batch's renames are
done, and after one more ``syncfs`` the upper copies of copied files and the
used whiteouts are removed. Two flushes per batch instead of one per file, the
same guarantee.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from manager.changes.model import Layer
from manager.changes.model import is_within
from manager.commit import judged
from manager.commit.journal import Step
from manager.commit.judged import Unjudged
from manager.commit.safefs import DIR_FLAGS
from manager.commit.safefs import DirChain
from manager.commit.safefs import copy_xattrs
from manager.commit.safefs import lstat_at
from manager.commit.safefs import open_dir_at
from manager.commit.safefs import overlay_xattrs
from manager.commit.safefs import proc_path
from manager.commit.safefs import rel_parts
from manager.commit.safefs import remove_at
from manager.commit.safefs import sync_xattrs
from manager.commit.safefs import syncfs
from manager.commit.trees import LEFT
from manager.commit.trees import Census
from manager.commit.trees import publish
from manager.fs.regular import open_regular
from manager.fs.sparse import copy_data

BATCH_STEPS = 4096
BATCH_BYTES = 256 << 20
UNSUPPORTED_XATTRS = ("overlay.metacopy", "overlay.redirect")

# Returns None to apply the step, "done" when it is already applied, else a conflict reason.
Check = Callable[["Executor", Step, int, str], str | None]


@dataclass
class Outcome:
    applied: list[Step] = field(default_factory=list)
    done: list[Step] = field(default_factory=list)      # found already applied (resumed)
    conflicts: list[tuple[Step, str]] = field(default_factory=list)
    errors: list[tuple[Step, str]] = field(default_factory=list)


@dataclass
class _Pending:
    step: Step
    temp: str | None = None  # a prepared copy beside the destination
    size: int = 0            # bytes copied (a batch's worth is flushed at once)
    tree: bool = False       # a new directory's copy, whole (commit/trees.py)


class Executor:
    def __init__(self, layers: list[Layer], token: str, check: Check | None = None) -> None:
        self.layers = layers
        self.token = token
        self.check = check
        self.progress: Callable[[int, int, int], None] | None = None   # (done, total, bytes)
        self.real = [DirChain(layer.target) for layer in layers]
        self.upper = [DirChain(layer.upper) for layer in layers]
        self.outcome = Outcome()
        self._counter = itertools.count()
        self._dir_meta: list[tuple[Step, os.stat_result, bool]] = []
        self._later: list[Step] = []  # upper entries to remove once renames are durable
        # ... of them, names of an inode with other names: removed last, as removing a name
        # moves the inode's ctime, which the other names' steps check (commit/judged.py).
        self._linked: list[Step] = []
        self._real_fds: dict[int, int] = {}
        self.trees: dict[str, Census] = {}   # the plan's tree steps' censuses (empty: resumed)

    def close(self) -> None:
        for chain in (*self.real, *self.upper):
            chain.forget(())
        for fd in self._real_fds.values():
            os.close(fd)

    # -- paths ------------------------------------------------------------------

    def real_at(self, step: Step) -> tuple[int, str]:
        return _at(self.real[step.layer], self.layers[step.layer].target, step.path)

    def upper_at(self, step: Step) -> tuple[int, str]:
        assert step.upper is not None
        return _at(self.upper[step.layer], self.layers[step.layer].upper, step.upper)

    def temp_name(self) -> str:
        return f".ws-{self.token}-{next(self._counter)}"

    def temp_prefix(self) -> str:
        return f".ws-{self.token}-"

    # -- running ----------------------------------------------------------------

    def run(self, steps: list[Step]) -> Outcome:
        self._sync_uppers()
        batch: list[_Pending] = []
        size = written = 0
        extra = 0   # the paths below tree steps (progress counts paths)
        total = len(steps) + sum(len(c.entries) for c in self.trees.values())
        for done, step in enumerate(steps, 1):
            if step.action == "tree" and step.path in self.trees:
                extra += len(self.trees[step.path].entries)
            item = self._try_prepare(step)
            if item is not None:
                batch.append(item)
                size += item.size
                written += item.size
            if len(batch) >= BATCH_STEPS or size >= BATCH_BYTES:
                self._flush(batch)
                batch, size = [], 0
                if self.progress is not None:
                    self.progress(done + extra, total, written)
        self._flush(batch)
        if self.progress is not None:
            self.progress(total, total, written)
        self._finish_dirs()
        self._sync_reals()
        self._later, self._linked = self._linked, []
        self._remove_later(last=True)
        return self.outcome

    def _flush(self, batch: list[_Pending]) -> None:
        if any(item.temp is not None for item in batch):
            self._sync_reals()  # copies are on disk before any rename publishes them
        for item in batch:
            self._try_publish(item)
        if self._later:
            self._sync_reals()  # renames are on disk before their upper copies go
            self._remove_later()

    def _try_prepare(self, step: Step) -> _Pending | None:
        try:
            return self._prepare(step)
        except Unjudged as exc:
            if self.check is None:   # resumed: the same commit's fresh plan judges it
                self.outcome.errors.append((step, _describe(exc)))
            return None
        except OSError as exc:
            self.outcome.errors.append((step, _describe(exc)))
            return None

    def _try_publish(self, item: _Pending) -> None:
        try:
            self._publish(item)
        except OSError as exc:
            self.outcome.errors.append((item.step, _describe(exc)))
            if item.temp is not None:
                self._drop_temp(item.step, item.temp)

    def _prepare(self, step: Step) -> _Pending | None:
        dir_fd, name = self.real_at(step)
        self.note_filesystem(dir_fd)
        verdict = self.check(self, step, dir_fd, name) if self.check else None
        if verdict == "done":
            self.outcome.done.append(step)
            self._after_done(step)
            return None
        if verdict is not None:
            if verdict != LEFT:
                self.outcome.conflicts.append((step, verdict))
            return None
        if step.action == "tree":
            return self._prepare_tree(step, dir_fd, name)
        if step.action == "dir":
            self._make_dir(step, dir_fd, name)
            return None
        if step.action == "write":
            return self._prepare_write(step, dir_fd)
        return _Pending(step)

    def note_filesystem(self, dir_fd: int) -> None:
        """Keep one descriptor per destination filesystem, for syncfs."""
        dev = os.fstat(dir_fd).st_dev
        if dev not in self._real_fds:
            self._real_fds[dev] = os.dup(dir_fd)

    def _prepare_tree(self, step: Step, dir_fd: int, name: str) -> _Pending | None:
        """The tree's copy, renamed into place with the batch (:meth:`_publish`)."""
        made = publish(self, step, dir_fd, name)
        if isinstance(made, tuple):
            temp, size = made
            return _Pending(step, temp, size, tree=True)
        if made != LEFT:
            self.outcome.conflicts.append((step, made))
        return None

    def _after_done(self, step: Step) -> None:
        if step.upper is not None and not step.keep_upper and step.action != "dir":
            self._later.append(step)

    def _publish(self, item: _Pending) -> None:
        step = item.step
        dir_fd, name = self.real_at(step)
        if step.action == "remove":
            self._remove_real(step, dir_fd, name)
            if step.upper is not None and not step.keep_upper:
                self._later.append(step)
        elif item.tree:
            assert item.temp is not None
            os.rename(item.temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            self._later.append(step)
        else:
            assert item.temp is not None   # a write: always a copy (_prepare_write)
            self._clear_dir(step, dir_fd, name)
            os.replace(item.temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            if not step.keep_upper:
                self._later.append(step)
        self.outcome.applied.append(step)

    # -- removing ---------------------------------------------------------------

    def _remove_real(self, step: Step, dir_fd: int, name: str) -> None:
        st = lstat_at(dir_fd, name)
        if st is None:
            return
        if stat.S_ISDIR(st.st_mode):
            self._clear_dir(step, dir_fd, name)
        else:
            os.unlink(name, dir_fd=dir_fd)

    def _clear_dir(self, step: Step, dir_fd: int, name: str) -> None:
        """Take a real directory out of the way: rename it aside, then delete it."""
        st = lstat_at(dir_fd, name)
        if st is None or not stat.S_ISDIR(st.st_mode):
            return
        trash = self.temp_name()
        os.rename(name, trash, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        self.real[step.layer].forget(_parts(self.layers[step.layer].target, step.path))
        remove_at(dir_fd, trash)

    def _remove_later(self, last: bool = False) -> None:
        doomed: list[tuple[Step, int, str]] = []   # (step, its upper directory (a dup), name)
        top = ""
        try:
            for step in sorted(self._later, key=lambda s: Path(s.upper or "").parts):
                if top and is_within(step.upper or "", top):
                    continue   # goes with the directory above it
                try:
                    dir_fd, name = self.upper_at(step)
                    st = lstat_at(dir_fd, name)
                    if st is not None and st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode) \
                            and step.action == "write" and not last:
                        self._linked.append(step)
                    elif st is not None:
                        doomed.append((step, os.dup(dir_fd), name))
                        top = step.upper or "" if stat.S_ISDIR(st.st_mode) else top
                except OSError as exc:
                    self._removal_failed(step, exc)
            self._later.clear()
            for failed_step, failure in _remove_each(doomed):
                self._removal_failed(failed_step, failure)
        finally:
            for _, fd, _ in doomed:
                os.close(fd)

    def _removal_failed(self, step: Step, exc: OSError) -> None:
        if isinstance(exc, FileNotFoundError):
            return   # its directory is gone already (a resumed commit's tidying got that far)
        if isinstance(exc, PermissionError):
            return   # in a read-only upper directory: tidying removes the whole directory
        self.outcome.errors.append((step, "committed, but its sandbox copy could not be "
                                          f"removed: {_describe(exc)}"))

    # -- files ------------------------------------------------------------------

    def _prepare_write(self, step: Step, dir_fd: int) -> _Pending:
        """A temporary copy beside the destination, unless the upper entry can move."""
        up_fd, up_name = self.upper_at(step)
        ust = os.stat(up_name, dir_fd=up_fd, follow_symlinks=False)
        judged.require(step.judged, judged.entry(ust), step.path, resumed=self.check is not None)
        _refuse_unsupported(step, up_fd, up_name)
        # Always a copy (see the module's docstring): renamed, the upper inode would stay
        # within reach of the overlay's descriptors, and of its other hard links (left in
        # the upper dir, never reviewed); and the copy is the committer's own.
        return _Pending(step, self._copy_beside(step, up_fd, up_name, ust, dir_fd), ust.st_size)

    def _copy_beside(self, step: Step, up_fd: int, up_name: str, ust: os.stat_result,
                     dir_fd: int) -> str:
        temp = self.temp_name()
        try:
            _copy_entry(up_fd, up_name, ust, dir_fd, temp)
        except BaseException:
            self._drop_temp(step, temp)
            raise
        return temp

    def _drop_temp(self, step: Step, temp: str) -> None:
        try:
            dir_fd, _ = self.real_at(step)
            remove_at(dir_fd, temp)
        except OSError:
            pass  # a stray temp is removed when the journal is resumed

    # -- directories ------------------------------------------------------------

    def _make_dir(self, step: Step, dir_fd: int, name: str) -> None:
        up_fd, up_name = self.upper_at(step)
        ust = os.stat(up_name, dir_fd=up_fd, follow_symlinks=False)
        rst = lstat_at(dir_fd, name)
        created = rst is None or not stat.S_ISDIR(rst.st_mode)
        if rst is not None and not created and os.geteuid() != 0 \
                and not rst.st_mode & stat.S_IWUSR:
            # Its children arrive first; _finish_dirs sets its mode (again, when resumed).
            fd = open_dir_at(dir_fd, name, Path(step.path).parent)
            try:
                os.fchmod(fd, stat.S_IMODE(rst.st_mode) | stat.S_IWUSR | stat.S_IXUSR)
            finally:
                os.close(fd)
        if rst is None:
            os.mkdir(name, 0o700, dir_fd=dir_fd)
        elif created:
            temp = self.temp_name()
            os.mkdir(temp, 0o700, dir_fd=dir_fd)
            os.unlink(name, dir_fd=dir_fd)
            os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        # Modes are set last: a read-only directory must still receive its children.
        self._dir_meta.append((step, ust, created))
        self.outcome.applied.append(step)

    def _finish_dirs(self) -> None:
        for step, ust, created in reversed(self._dir_meta):
            try:
                up_fd, up_name = self.upper_at(step)
                found = judged.directory_at(up_fd, up_name)
                if not found.startswith(judged.owned(ust) + ":"):
                    raise Unjudged(step.path)   # changed since _make_dir read it
                judged.require(step.judged, found, step.path, resumed=self.check is not None)
            except OSError as exc:
                # Made (its entries are in it), but not given what was not judged: the step
                # is not applied, so its upper entry stays pending.
                self.outcome.applied.remove(step)
                if self.check is None or not isinstance(exc, Unjudged):
                    self.outcome.errors.append((step, _describe(exc)))
                continue
            try:
                dir_fd, name = self.real_at(step)
                fd = open_dir_at(dir_fd, name, Path(step.path).parent)
                try:
                    sync_xattrs(proc_path(up_fd, up_name), fd)
                    _set_meta(fd, ust, times=created)
                finally:
                    os.close(fd)
            except OSError as exc:
                self.outcome.errors.append((step, _describe(exc)))

    # -- durability -------------------------------------------------------------

    def _sync_uppers(self) -> None:
        for layer in self.layers:
            try:
                fd = os.open(layer.upper, DIR_FLAGS)
            except OSError:
                continue
            try:
                syncfs(fd)
            finally:
                os.close(fd)

    def _sync_reals(self) -> None:
        for fd in self._real_fds.values():
            syncfs(fd)


REMOVERS = 4   # threads: unlink waits on the filesystem, not the interpreter


def _remove_each(doomed: list[tuple[Step, int, str]]) -> list[tuple[Step, OSError]]:
    """Remove each entry (none inside another); the failures. Many go in parallel: each is
    one unlink (or a tree's), which releases the interpreter; on ext4 with two cores 10,000
    unlinks took 1.0 s in one thread, 0.4-0.6 s in four."""
    def remove(item: tuple[Step, int, str]) -> tuple[Step, OSError] | None:
        step, dir_fd, name = item
        try:
            remove_at(dir_fd, name)
        except OSError as exc:
            return step, exc
        return None

    if len(doomed) < 2 * REMOVERS:
        done = [remove(item) for item in doomed]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(REMOVERS) as pool:
            done = list(pool.map(remove, doomed))
    return [failed for failed in done if failed is not None]


def _at(chain: DirChain, root: Path, path: str) -> tuple[int, str]:
    try:
        parts = _parts(root, path)
    except ValueError:
        raise OSError(errno.EINVAL, f"{path} is not below its layer's root {root}") from None
    return chain.fd(parts[:-1]), parts[-1]


def _parts(root: Path, path: str) -> tuple[str, ...]:
    return rel_parts(root, path)


def _refuse_unsupported(step: Step, dir_fd: int, name: str) -> None:
    found = [x for x in overlay_xattrs(dir_fd, name) if x.endswith(UNSUPPORTED_XATTRS)]
    if found:
        raise OSError(errno.ENOTSUP, f"{step.upper} carries {found[0]}: overlays mounted with "
                                     "metacopy or redirect_dir are not supported")


def _copy_entry(up_fd: int, up_name: str, ust: os.stat_result, dir_fd: int, temp: str) -> None:
    """Copy the upper entry ``ust`` describes, only while it is that entry
    (commit/judged.py: a file is read from one descriptor, checked before and after)."""
    if stat.S_ISLNK(ust.st_mode):
        os.symlink(os.readlink(up_name, dir_fd=up_fd), temp, dir_fd=dir_fd)
        if os.geteuid() == 0:
            os.chown(temp, ust.st_uid, ust.st_gid, dir_fd=dir_fd, follow_symlinks=False)
        copy_xattrs(proc_path(up_fd, up_name), proc_path(dir_fd, temp))
        os.utime(temp, ns=(ust.st_atime_ns, ust.st_mtime_ns), dir_fd=dir_fd,
                 follow_symlinks=False)
    elif stat.S_ISREG(ust.st_mode):
        _copy_file(up_fd, up_name, ust, dir_fd, temp)
        return   # checked from its descriptor
    else:  # fifos, sockets, devices (devices only as root)
        os.mknod(temp, ust.st_mode, ust.st_rdev, dir_fd=dir_fd)
        if os.geteuid() == 0:
            os.chown(temp, ust.st_uid, ust.st_gid, dir_fd=dir_fd, follow_symlinks=False)
        os.chmod(temp, stat.S_IMODE(ust.st_mode), dir_fd=dir_fd)  # after chown: it clears setuid
        copy_xattrs(proc_path(up_fd, up_name), proc_path(dir_fd, temp))
    # After the last read of it (the target, the xattrs): the entry read was the one judged.
    judged.same_while_read(ust, os.stat(up_name, dir_fd=up_fd, follow_symlinks=False), up_name)


def _copy_file(up_fd: int, up_name: str, ust: os.stat_result, dir_fd: int, temp: str) -> None:
    src = open_regular(up_name, dir_fd=up_fd)   # swapped for a device since the stat: refused
    try:
        judged.same_while_read(ust, os.fstat(src), up_name)
        dst = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                      0o600, dir_fd=dir_fd)
        try:
            copy_data(src, dst, ust.st_size)
            if os.geteuid() == 0:
                _set_meta(dst, ust, times=True)
                copy_xattrs(src, dst)   # capabilities last: a chown would clear them
            else:
                copy_xattrs(src, dst)   # before the mode: a read-only file takes no user xattr
                _set_meta(dst, ust, times=True)
            # After the last read of it (data, xattrs): what was copied was what was judged.
            judged.same_while_read(ust, os.fstat(src), up_name)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _set_meta(fd: int, ust: os.stat_result, *, times: bool) -> None:
    st = os.fstat(fd)
    if os.geteuid() == 0 and (st.st_uid, st.st_gid) != (ust.st_uid, ust.st_gid):
        os.fchown(fd, ust.st_uid, ust.st_gid)
    if stat.S_IMODE(st.st_mode) != stat.S_IMODE(ust.st_mode):
        os.fchmod(fd, stat.S_IMODE(ust.st_mode))
    if times:
        os.utime(fd, ns=(ust.st_atime_ns, ust.st_mtime_ns))


def _describe(exc: OSError) -> str:
    if exc.filename:
        return f"{exc.strerror}: {exc.filename}"
    return exc.strerror or str(exc)
