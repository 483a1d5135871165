"""Namespace holders outlive the CLI by design: a test's end is theirs."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path


def stop_holders(base: Path) -> None:
    """Kill the overlay holders whose sandbox lies under ``base`` (another user's: left alone)."""
    prefix = str(base).encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(part.endswith(b"overlay_holder.py") for part in cmdline) and \
                any(part.startswith(prefix) for part in cmdline):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(pid), signal.SIGKILL)
    if os.geteuid() != 0:
        _hand_back_under(base)


def _hand_back_under(base: Path) -> None:
    """An ordinary user's sandboxes hold the namespace's root's entries (subordinate ids on
    disk) until handed back: without this, pytest could not remove its old tmp dirs."""
    from manager.engines import overlay

    # Where state lives in tests: BASE/state (conftest) or BASE/account/state (accounts).
    for pattern in ("state/workspace/*/*/sandbox", "*/state/workspace/*/*/sandbox",
                    "state/workspace/probe/*", "*/state/workspace/probe/*"):
        for sandbox in base.glob(pattern):
            if (sandbox / "idmap.json").exists():
                with contextlib.suppress(OSError):
                    overlay.hand_back(sandbox, skeleton=True)
