"""The room left where the sandbox's writes land: an agent's writes fill the upper
directory, on the filesystem of workspace's state directory, until the user reviews
them; status says how much room is left there, and warns when it runs low (an agent
that writes without end is stopped by the disk, and the user should hear it first)."""

from __future__ import annotations

import os
from pathlib import Path

LOW_BYTES = 2 << 30   # below this, or below LOW_SHARE of the disk, status warns
LOW_SHARE = 0.05


def of(sandbox: Path) -> dict[str, object]:
    """Free and total bytes (for this user) of the filesystem holding ``sandbox``."""
    st = os.statvfs(sandbox if sandbox.exists() else sandbox.parent)
    free, total = st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
    return {"path": str(sandbox), "free_bytes": free, "total_bytes": total,
            "low": free < LOW_BYTES or free < total * LOW_SHARE}


def warning(space: dict[str, object]) -> str | None:
    """The line status shows when room runs low, else None."""
    from manager import ui

    if not space["low"]:
        return None
    free, total = space["free_bytes"], space["total_bytes"]
    assert isinstance(free, int) and isinstance(total, int)
    return (f"disk: {ui.human_bytes(free)} free of {ui.human_bytes(total)} where the sandbox's "
            f"writes land ({ui.quote(str(space['path']))}); commit or discard to free it")
