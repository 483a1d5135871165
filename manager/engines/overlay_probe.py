"""What the overlay engine needs from the host, each check with its fix."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import tempfile

from manager.engines.base import Check

MIN_KERNEL = (5, 11)  # overlayfs inside a user namespace


def checks() -> list[Check]:
    result = [_linux(), _kernel(), *_tools()]
    if all(c.ok for c in result):
        userns = _userns()
        result.append(userns)
        if userns.ok:
            result.append(_overlay_in_userns())
    return result


def _linux() -> Check:
    ok = platform.system() == "Linux"
    return Check("linux", ok, platform.system(), "" if ok else "use engine podman or docker")


def _kernel() -> Check:
    release = platform.release()
    try:
        version = tuple(int(p) for p in release.split("-")[0].split(".")[:2])
    except ValueError:
        version = (0, 0)
    ok = version >= MIN_KERNEL
    return Check("kernel >= 5.11", ok, release,
                 "" if ok else "upgrade the kernel, or use engine podman or docker")


def _tools() -> list[Check]:
    found = []
    for tool in ("unshare", "nsenter", "mount"):
        path = shutil.which(tool) or (f"/usr/bin/{tool}" if os.path.exists(f"/usr/bin/{tool}") else None)
        found.append(Check(f"{tool} installed", path is not None, path or "not found",
                           "" if path else "install util-linux"))
    return found


def _run(argv: list[str]) -> tuple[int, str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, str(exc)
    return proc.returncode, (proc.stderr or proc.stdout).strip()


def _userns() -> Check:
    rc, out = _run(["unshare", "--user", "--map-root-user", "--mount", "true"])
    return Check("user + mount namespaces", rc == 0, out or "works",
                 "" if rc == 0 else "allow unprivileged user namespaces "
                 "(sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu "
                 "kernel.apparmor_restrict_unprivileged_userns=0), or use podman/docker")


def _overlay_in_userns() -> Check:
    with tempfile.TemporaryDirectory(prefix="workspace-probe-") as tmp:
        for d in ("lower", "upper", "work", "merged"):
            os.mkdir(os.path.join(tmp, d))
        options = f"userxattr,lowerdir={tmp}/lower,upperdir={tmp}/upper,workdir={tmp}/work"
        script = f"mount -t overlay overlay -o {options} {tmp}/merged && touch {tmp}/merged/x"
        rc, out = _run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script])
        ok = rc == 0 and os.path.exists(os.path.join(tmp, "upper", "x"))
        return Check("overlayfs in a user namespace", ok, out or "works",
                     "" if ok else "needs Linux >= 5.11 with overlayfs (modprobe overlay); "
                     "or use engine podman or docker")
