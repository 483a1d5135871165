"""Run as root, the session's processes see only a cgroup subtree of their own.

A command that is the host's uid 0 (the holder run by real root maps every id to itself)
could make a cgroup namespace and mount a cgroup or cgroup2 file system: a fresh mount,
not covered by the read-only locks on /sys, rooted at the command's cgroup, whose files
belong to uid 0, so it wrote the host's cgroup files. So before it makes its namespaces
the holder moves itself into a new cgroup, ``workspace-PID``, below its own in every
hierarchy it is in (cgroup v1 and v2), and the cgroup namespace it makes with the others
is rooted there: whatever a command mounts shows only the session's subtree. A non-root
cgroup namespace cannot make a new v1 hierarchy either (the kernel refuses). The other
pseudo file systems that expose host state (bpf, debugfs, tracefs, securityfs, configfs,
pstore, efivarfs) cannot be mounted from a user namespace at all.

The directories are listed in the sandbox's ``cgroups`` file, which each call's entry
reads to join them (``enter.sh``); the engine removes them once the holder is gone
(:func:`remove`), and a holder starting sweeps those of holders gone otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import mountinfo

RECORD = "cgroups"


def confine(sandbox: Path) -> None:
    """Move this process into a new cgroup in each of its hierarchies; OSError if one fails
    (then nothing is recorded for the calls to join; what was made is swept later)."""
    made: list[str] = []
    try:
        for here in _own_cgroups():
            _sweep(here)
            new = os.path.join(here, f"workspace-{os.getpid()}")
            os.mkdir(new, 0o755)
            made.append(new)
            for name in ("cpuset.cpus", "cpuset.mems"):   # v1 cpuset: empty refuses tasks
                if os.path.exists(os.path.join(here, name)):
                    Path(new, name).write_text(Path(here, name).read_text())
            Path(new, "cgroup.procs").write_text(f"{os.getpid()}\n")
    except OSError:
        (sandbox / RECORD).write_text("")
        raise
    (sandbox / RECORD).write_text("".join(f"{d}\n" for d in made))


def remove(sandbox: Path) -> None:
    """Remove the session's cgroups (empty once its processes are gone); best effort."""
    try:
        paths = (sandbox / RECORD).read_text().split("\n")
    except OSError:
        return
    left = [p for p in paths if p and _rmdir(p)]
    (sandbox / RECORD).write_text("".join(f"{d}\n" for d in left))


def _sweep(here: str) -> None:
    """Remove the cgroups of holders gone (killed, or ended by themselves without the
    engine's release): the kernel refuses to remove one that still holds a process."""
    for entry in os.scandir(here):
        if entry.name.startswith("workspace-") and entry.name[10:].isdigit():
            _rmdir(entry.path)


def _rmdir(path: str) -> bool:
    """True when ``path`` is still there."""
    if not os.path.basename(path).startswith("workspace-"):
        return False      # never anything but ours, whatever the record says
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return False


def _own_cgroups() -> list[str]:
    """This process's cgroup directory in every mounted hierarchy it belongs to."""
    mounts = _cgroup_mounts()
    found = []
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _hid, controllers, path = line.split(":", 2)
        key = "cgroup2" if controllers == "" else frozenset(controllers.split(","))
        where = mounts.get(key)
        if where is None:
            raise OSError(f"cgroup hierarchy {controllers or 'v2'} is not mounted here")
        point, root = where
        rel = os.path.relpath(path, root) if path != root else "."
        if rel.startswith(".."):
            raise OSError(f"cgroup {path} lies outside its mount's root {root}")
        found.append(os.path.normpath(os.path.join(point, rel)))
    return found


def _cgroup_mounts() -> dict[object, tuple[str, str]]:
    """Hierarchy (its controllers and name=, or "cgroup2") to (mount point, its root)."""
    mounts: dict[object, tuple[str, str]] = {}
    known = {line.split()[0] for line in Path("/proc/cgroups").read_text().splitlines()
             if line and not line.startswith("#")}
    for root, point, fstype, options in mountinfo.sources(mountinfo.read()):
        if fstype == "cgroup2":
            mounts.setdefault("cgroup2", (point, root))
        elif fstype == "cgroup":
            names = {o for o in options.split(",") if o in known or o.startswith("name=")}
            mounts.setdefault(frozenset(names), (point, root))
    return mounts

