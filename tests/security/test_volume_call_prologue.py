"""attack5: in volume mode a root call replaces ``ws-exec``; the next call keeps CAP_SYS_ADMIN.

docs/security.md listed this as "not reproduced". Reproduced (docker, container.upper:
volume, the engine run by root, so calls are 0:0 in the container): the container's own
filesystem is writable by the call, and enter.sh runs ``docker exec CTR ws-exec ... --
setpriv --bounding-set -sys_admin -- bash -c CALL``: ``ws-exec`` is the container's and runs
before the capability is dropped. Call 1 replaces it with a wrapper that drops the
``setpriv ...`` words; call 2 then runs with CAP_SYS_ADMIN: it unmounts the hide mask over the
real project's bind (/run/ws-lower), reads the hidden file, remounts the bind read-write and
writes the real project, with no review and no commit. The same retained capability mounts
the host's cgroup v1 hierarchies (docker on cgroup v1 shares the host's cgroup namespace)
and opens their ``release_agent`` for writing: host root code execution (not written here).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.claude.conftest import Claude
from tests.engines.conftest import using_engine

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]

REPLACE = r'''W=$(command -v ws-exec); mv "$W" "$W.real" && cat > "$W" <<'WS'
#!/bin/bash
a=() skip=0
for x in "$@"; do
  if [[ $x == setpriv ]]; then skip=3; continue; fi
  if ((skip > 0)); then skip=$((skip - 1)); continue; fi
  a+=("$x")
done
exec "$0.real" "${a[@]}"
WS
chmod 755 "$W"'''

ESCAPE = ('umount /run/ws-lower/secret.env; cat /run/ws-lower/secret.env; '
          'mount -o remount,rw,bind /run/ws-lower && echo escaped > /run/ws-lower/ESCAPED; true')


@pytest.fixture(params=["docker-volume", "podman-volume"])
def volume_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                  ) -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.skip("calls are root in the container only when the engine runs as root")
    yield from using_engine(request, monkeypatch)


def test_a_replaced_ws_exec_keeps_no_capability_for_the_next_call(project: Path, tmp_path: Path,
                                                                   volume_engine: str):
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "workspace"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.yaml").write_text("hide: [secret.env]\n")
    (project / "secret.env").write_text("TOPSECRET=hunter2\n")
    claude = Claude(project, tmp_path)
    claude.env["WORKSPACE_ENGINE"] = volume_engine.split("-")[0]
    assert claude.start().returncode == 0
    claude.bash(REPLACE)
    run = claude.bash(ESCAPE)
    reached = {"read the hidden file": "hunter2" in run.stdout,
               "wrote the real project": (project / "ESCAPED").exists()}
    assert not any(reached.values()), reached


# The class: every program of the container's (and the loader's preload file) a root call can
# replace, wrapped to log the capabilities it runs with; none may run with CAP_SYS_ADMIN.
WRAP_ALL = r'''echo /tmp/wrapped.so > /etc/ld.so.preload 2>/dev/null && echo PRELOAD-WRITTEN
for p in ws-exec env bash setpriv; do
  P=$(command -v $p); cp "$P" "$P.real"
  printf '#!/bin/sh\ngrep CapEff /proc/self/status >> /tmp/caps.log\nexec "$0.real" "$@"\n' > "$P.w"
  chmod 755 "$P.w" && mv "$P.w" "$P"
done; true'''
SYS_ADMIN_BIT = 1 << 21


def test_no_program_a_root_call_can_replace_runs_before_the_drop(project: Path, tmp_path: Path,
                                                                   volume_engine: str):
    claude = Claude(project, tmp_path)
    claude.env["WORKSPACE_ENGINE"] = volume_engine.split("-")[0]
    assert claude.start().returncode == 0
    planted = claude.bash(WRAP_ALL)
    assert "PRELOAD-WRITTEN" not in planted.stdout
    assert claude.bash("true").returncode == 0          # runs through whatever was planted
    logged = claude.bash("cat /tmp/caps.log").stdout.split()
    caps = [int(word, 16) for word in logged if word != "CapEff:"]
    assert caps, "no wrapped program ran: the test proves nothing"
    assert not [c for c in caps if c & SYS_ADMIN_BIT], logged
