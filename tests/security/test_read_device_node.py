"""Attack pass 7: a root call in docker's container holds CAP_MKNOD (docker's default set; volume
mode drops only CAP_SYS_ADMIN), so it can make a device node of any major and minor. In host
mode it lands in the session's upper directory on the host as it is; in volume mode the export
(status, diff, commit) unpacks it on the host as one (tarstream: ``makedev``). The agent's
Read of that path is redirected there: the hook
(readcopy.take) opens it, O_RDONLY on the host as the user, before it finds it is no regular
file. Opening a device acts on the host: ``c 10 130`` arms the watchdog (closed without its
magic character, the machine reboots), a tape rewinds, a serial line raises DTR (docker
as root; podman's default capabilities have no CAP_MKNOD). Here
``c 1 3`` (the null device) stands for them, and the open is seen with inotify. The hook must
open no device a sandbox made (nor should the export make one on the host)."""

from __future__ import annotations

import ctypes
import os
import select
import struct
from pathlib import Path

import pytest

from tests.claude.conftest import Claude
from tests.engines.conftest import engine_cli
from tests.engines.conftest import engine_name  # noqa: F401 - the fixture

pytestmark = pytest.mark.needs_root

IN_OPEN = 0x20


def opened(fd: int) -> list[str]:
    names: list[str] = []
    while select.select([fd], [], [], 0.2)[0]:
        data = os.read(fd, 4096)
        while data:
            _, mask, _, size = struct.unpack("iIII", data[:16])
            name = data[16:16 + size].rstrip(b"\0").decode()
            if mask & IN_OPEN:
                names.append(name)
            data = data[16 + size:]
    return names


# podman (rootful) refuses the mknod: its default set has no CAP_MKNOD.
@pytest.mark.parametrize("engine_name", ["docker", "docker-volume"], indirect=True)
def test_read_opens_no_device_node_the_sandbox_made(engine_name: str, ws, tmp_path: Path,  # noqa: F811
                                                   project: Path):
    claude = Claude(project, tmp_path, engine=engine_cli(engine_name))
    assert claude.start().returncode == 0
    assert claude.bash("mknod dev.txt c 1 3").returncode == 0
    ws("status")   # the export
    upper = Path(os.environ["XDG_STATE_HOME"]) / "workspace/sessions/sess-1/sandbox/upper"
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    assert fd >= 0
    try:
        assert libc.inotify_add_watch(fd, str(upper).encode(), IN_OPEN) >= 0
        claude.hook("PreToolUse", {"tool_name": "Read", "permission_mode": "default",
                                   "tool_input": {"file_path": str(project / "dev.txt")}})
        seen = opened(fd)
    finally:
        os.close(fd)
    devices = [p.name for p in upper.iterdir() if p.is_char_device() or p.is_block_device()]
    assert "dev.txt" not in seen, {"the hook opened the device": seen, "on the host": devices}
