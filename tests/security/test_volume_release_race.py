"""Attack pass 6: volume mode's entry drops CAP_SYS_ADMIN from a root call only while the
sandbox's ``volume`` mark exists (enter.sh: ``-e $S/volume``), and release (commit, discard)
removes that mark after the export, before it removes the container. A call that enters in
between runs in the still-running container as root with CAP_SYS_ADMIN in its bounding set:
it can remount the read-only project bind (the real project) read-write. The drop should
follow the container (how it was made), not the mark of its changes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.claude.conftest import Claude
from tests.engines.conftest import engine_cli
from tests.engines.conftest import engine_name  # noqa: F401 - the fixture

# A root call (U 0:0): the host user is root. (An ordinary user's call on rootless podman holds
# CAP_SYS_ADMIN always: test_volume_call_ambient_caps.py.)
pytestmark = pytest.mark.needs_root

SYS_ADMIN = 1 << 21
PROBE = ("grep CapEff /proc/self/status; mount -o remount,bind,rw /run/ws-lower 2>/dev/null && "
         "touch /run/ws-lower/ESCAPED-$$ 2>/dev/null; true")
ROUNDS = 3


@pytest.mark.parametrize("engine_name", ["docker-volume", "podman-volume"], indirect=True)
def test_no_call_keeps_cap_sys_admin_while_a_commit_releases(
        engine_name: str, ws, tmp_path: Path, project: Path):  # noqa: F811
    claude = Claude(project, tmp_path, engine=engine_cli(engine_name))
    claude.start()
    seen: list[int] = []
    committed = 0
    for round_ in range(ROUNDS):
        assert claude.bash(f"echo {round_} > f{round_}.txt; " + PROBE).returncode == 0
        rewritten = claude.pre_bash(PROBE).command
        stop = threading.Event()

        def hammer(stop: threading.Event = stop, rewritten: str = rewritten) -> None:
            while not stop.is_set():
                out = claude.shell(rewritten, timeout=30).stdout
                for line in out.splitlines():
                    if line.startswith("CapEff:"):
                        seen.append(int(line.split()[1], 16))
                time.sleep(0.02)   # gaps: the commit's check that no call runs passes
        threads = [threading.Thread(target=hammer) for _ in range(2)]
        for t in threads:
            t.start()
        for _ in range(30):   # until one starts while no call runs: then calls race it
            if ws("commit").returncode == 0:
                committed += 1
                break
        stop.set()
        for t in threads:
            t.join()
    print("calls", len(seen), "commits", committed)
    assert seen, "no call ran"
    escaped = sorted(p.name for p in project.glob("ESCAPED-*"))
    assert not escaped, f"a call wrote into the real project: {escaped}"
    assert not [b for b in seen if b & SYS_ADMIN], [hex(b) for b in seen if b & SYS_ADMIN]
