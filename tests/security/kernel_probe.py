"""Run inside the sandbox (python3 -I -S): try to reach the host's kernel interfaces that
check only the owner, as a hostile command would, and print one JSON line:
{probe: "reached" | "refused: <why>"}.

Never changes host state when it does reach: a sysctl is written its own value, every
other interface is only opened and closed (no device is read or written; no watchdog).
The "undo_*" probes first try to remove a mask (each in a child process with a mount
namespace of its own when it may make one), then try what the mask covers.

argv: the host's IPC namespace (as /proc/self/ns/ipc names it), then the host's block
devices and other device nodes to try, as /dev paths.
"""

import ctypes
import json
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)
MNT_DETACH = 2
MS_REMOUNT, MS_BIND = 0x20, 0x1000
CLONE_NEWNS = 0x00020000
SYSFS = ("/sys/kernel/mm/transparent_hugepage/enabled", "/sys/power/state",
         "/sys/kernel/mm/ksm/run")
CGROUP = ("/sys/fs/cgroup/cgroup.procs", "/sys/fs/cgroup/pids/cgroup.procs",
          "/sys/fs/cgroup/unified/cgroup.procs")


def first(paths):
    return next((p for p in paths if os.path.exists(p)), paths[0])


def opened(path, flags=os.O_WRONLY):
    os.close(os.open(path, flags | os.O_NONBLOCK | os.O_NOCTTY))


def sysctl_rewrite():
    path = "/proc/sys/kernel/hostname"
    with open(path, "rb") as f:
        value = f.read()
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value)
    finally:
        os.close(fd)


def mknod_kmsg():
    node = "kernel-probe-kmsg"
    os.mknod(node, 0o600 | 0o020000, os.makedev(1, 11))
    try:
        opened(node)
    finally:
        os.unlink(node)


def mounted(result, what):
    if result != 0:
        raise OSError(ctypes.get_errno(), what)


def undo_proc():
    libc.umount2(b"/proc", MNT_DETACH)   # the call's own proc; the host's below it
    libc.mount(None, b"/proc", None, MS_REMOUNT | MS_BIND, None)
    opened("/proc/sys/kernel/hostname")


def fresh_proc():
    os.makedirs("/tmp/kernel-probe-proc", exist_ok=True)
    mounted(libc.mount(b"proc", b"/tmp/kernel-probe-proc", b"proc", 0, None), "mount proc")
    opened("/tmp/kernel-probe-proc/sys/kernel/hostname")


def undo_sys():
    libc.mount(None, b"/sys", None, MS_REMOUNT | MS_BIND, None)   # read-write again
    libc.umount2(b"/sys", MNT_DETACH)
    libc.mount(b"sysfs", b"/sys", b"sysfs", 0, None)
    opened(first(SYSFS))


def remount_writable(point):
    def attempt():
        mounted(libc.mount(None, point.encode(), None, MS_REMOUNT | MS_BIND, None),
                f"remount {point} read-write")
    return attempt


def host_devices(devices):
    def attempt():
        reached = []
        for path in devices:
            try:
                opened(path, os.O_RDONLY)
                reached.append(path)
            except OSError:
                continue
        if not reached:
            raise OSError(0, f"none of {len(devices)}")
    return attempt


def undo_dev(devices):
    def attempt():
        libc.umount2(b"/dev", MNT_DETACH)
        libc.mount(b"devtmpfs", b"/dev", b"devtmpfs", 0, None)
        for path in ["/dev/kmsg", *devices]:
            try:
                opened(path, os.O_RDONLY)
                return
            except OSError:
                continue
        raise OSError(2, "no device")
    return attempt


def in_child(action):
    """Run ``action`` in a child, in a mount namespace of its own when it may make one."""
    def run():
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            libc.unshare(CLONE_NEWNS)
            try:
                action()
                answer = "reached"
            except OSError as exc:
                answer = f"refused: {exc.strerror or exc}"
            os.write(write, answer.encode())
            os._exit(0)
        os.close(write)
        answer = os.read(read, 4096).decode()
        os.waitpid(pid, 0)
        if answer != "reached":
            raise OSError(0, answer.removeprefix("refused: "))
    return run


def same_ipc(host):
    def attempt():
        if os.readlink("/proc/self/ns/ipc") != host:
            raise OSError(0, "an IPC namespace of the sandbox's own")
    return attempt


def probes(host_ipc, devices):
    found = {
        "sysv_ipc": same_ipc(host_ipc),
        "sysctl_rewrite": sysctl_rewrite,
        "sysctl_core_pattern": lambda: opened("/proc/sys/kernel/core_pattern"),
        "sysctl_drop_caches": lambda: opened("/proc/sys/vm/drop_caches"),
        "sysrq_trigger": lambda: opened("/proc/sysrq-trigger"),
        "sysfs_attribute": lambda: opened(first(SYSFS)),
        "cgroup_procs": lambda: opened(first(CGROUP)),
        "dev_kmsg": lambda: opened("/dev/kmsg"),
        "mknod_device": mknod_kmsg,
        "undo_proc": in_child(undo_proc),
        "fresh_proc": in_child(fresh_proc),
        "undo_sys": in_child(undo_sys),
        "undo_dev": in_child(undo_dev(devices)),
        "host_devices": host_devices(devices),
        "remount_proc_writable": in_child(remount_writable("/proc")),
        "remount_sys_writable": in_child(remount_writable("/sys")),
    }
    return found


def main():
    results = {}
    for name, probe in probes(sys.argv[1], sys.argv[2:]).items():
        try:
            probe()
            results[name] = "reached"
        except OSError as exc:
            results[name] = f"refused: {exc.strerror or exc}"
    print(json.dumps(results))


main()
