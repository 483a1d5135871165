"""Namespace holders outlive the CLI by design: a test's end is theirs."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

from manager.engines.overlay.holder import mountinfo

# This release's holder (run by its directory) and an older release's (tests/upgrade).
HOLDER_PROGRAMS = (b"/engines/overlay", b"overlay_holder.py")


def stop_holders(base: Path) -> None:
    """Kill the overlay holders whose sandbox lies under ``base`` (another user's: left alone)."""
    prefix = str(base).encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(part.endswith(HOLDER_PROGRAMS) for part in cmdline) and \
                any(part.startswith(prefix) for part in cmdline):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(pid), signal.SIGKILL)
    if os.geteuid() != 0:
        _hand_back_under(base)


def _hand_back_under(base: Path) -> None:
    """An ordinary user's sandboxes hold the namespace's root's entries (subordinate ids on
    disk) until handed back: without this, pytest could not remove its old tmp dirs."""
    from manager.engines.overlay import engine as overlay
    # Where state lives in tests: BASE/state (conftest) or BASE/account/state (accounts).
    for pattern in ("state/workspace/*/*/sandbox", "*/state/workspace/*/*/sandbox",
                    "state/workspace/probe/*", "*/state/workspace/probe/*"):
        for sandbox in base.glob(pattern):
            if (sandbox / "idmap.json").exists():
                with contextlib.suppress(OSError):
                    overlay.hand_back(sandbox, skeleton=True)


# Rootless podman mounts a container's storage in the user's one long-lived pause namespace,
# where it stays after the test that made it (a temporary $HOME under /tmp): a /tmp with
# mounts below cannot be an overlay's lower layer there, and every later podman call would
# find /tmp (and a $HOME in it) left to the image. Test runs' own directories only.
TEST_DIRS = ("/tmp/workspace-test-", "/tmp/ws-test-user-", "/tmp/pytest-of-")
UNMOUNT = 'for point in "$@"; do umount -l "$point" 2>/dev/null; done'


def leftover_podman_mounts(uid: int) -> list[str]:
    """Mount points under test directories in ``uid``'s rootless podman pause namespace."""
    try:
        pid = Path(f"/run/user/{uid}/libpod/tmp/pause.pid").read_text().strip()
        points = mountinfo.points(mountinfo.read(pid))
    except OSError:
        return []
    return sorted((p for p in points if p.startswith(TEST_DIRS)), reverse=True)


def release_podman_mounts(user: str, uid: int) -> None:
    """Unmount them (as ``user``, through ``podman unshare``); cheap when there are none."""
    points = leftover_podman_mounts(uid)
    if not points:
        return
    prefix = ["runuser", "-u", user, "--"] if os.geteuid() != uid else []
    env = dict(os.environ, XDG_RUNTIME_DIR=f"/run/user/{uid}")
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run([*prefix, "podman", "unshare", "sh", "-c", UNMOUNT, "sh", *points],
                       env=env, cwd="/", capture_output=True, timeout=60)
