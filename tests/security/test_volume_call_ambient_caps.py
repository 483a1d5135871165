"""Attack pass 6: in volume mode an ordinary user's call (rootless podman, the call's uid
not 0) holds CAP_SYS_ADMIN as an *ambient* capability: podman grants a ``--cap-add``
capability to non-root users of the container too (CapEff = CapAmb = 0x200000 here). The
entry script drops it only from calls whose uid is 0 (enter.sh: ``${U%%:*} == 0``). Such a
call remounts the read-only bind of the real project (/run/ws-lower) read-write with
mount(2) (util-linux's mount refuses a non-root caller itself; the kernel does not) and
writes into the real project, unreviewed; it can unmount the hide masks the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.claude.conftest import Claude
from tests.engines.conftest import engine_cli
from tests.engines.conftest import engine_name  # noqa: F401 - the fixture

pytestmark = pytest.mark.as_user

REMOUNT = """grep CapEff /proc/self/status
python3 - <<'EOF'
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.mount(None, b"/run/ws-lower", None, 32 | 4096, None)   # MS_REMOUNT | MS_BIND: rw
try:
    open("/run/ws-lower/ESCAPED", "w").write("written from the sandbox\\n")
except OSError:
    pass
EOF
"""
SYS_ADMIN = 1 << 21


@pytest.mark.parametrize("engine_name", ["podman-volume", "docker-volume"], indirect=True)
def test_no_call_in_volume_mode_holds_cap_sys_admin(
        engine_name: str, ws, tmp_path: Path, project: Path):  # noqa: F811
    claude = Claude(project, tmp_path, engine=engine_cli(engine_name))
    claude.start()
    run = claude.bash(REMOUNT)
    caps = [int(line.split()[1], 16) for line in run.stdout.splitlines() if line.startswith("CapEff:")]
    assert caps, run
    assert not (project / "ESCAPED").exists(), "a call wrote into the real project"
    assert not caps[0] & SYS_ADMIN, hex(caps[0])
