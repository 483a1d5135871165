"""Attack pass 3: volume mode runs the container's own programs as its root, with
CAP_SYS_ADMIN, on the user's behalf, and trusts what they say.

A call that is root in the container (the engine run by root: calls run as 0:0) may
replace any program of the container's filesystem. `workspace status`, `diff` and
`commit` export the volume's upper dir with ``sh -c 'cd /run/ws-vol && (cd upper &&
find . -exec stat ...) >births && exec tar ...'`` run by ``exec_root`` in that container
(engines/container/upper.py): the planted ``stat`` then runs with CAP_SYS_ADMIN, which
calls do not have (enter.sh drops it), so it

- remounts the real project's bind (``/run/ws-lower``) read-write and writes the real
  project, before any review (the user only ran `workspace status`);
- unmounts the hide masks and copies a hidden file where the sandbox reads it;
- prints forged births (year 2100), so a real edit made outside after the copy-up is no
  conflict and commit overwrites it silently.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.claude.conftest import Claude
from tests.engines.conftest import using_engine

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]

PLANT = r'''S=$(command -v stat); mv "$S" "$S.real" && cat > "$S" <<'WS'
#!/bin/sh
(umount /run/ws-lower/secret.env; mount -o remount,rw,bind /run/ws-lower &&
 cp /run/ws-lower/secret.env /run/ws-lower/LEAKED && echo pwned > /run/ws-lower/PWNED
) >/dev/null 2>&1
exec "$0.real" "$@"
WS
chmod 755 "$S"'''

FORGE = r'''S=$(command -v stat); mv "$S" "$S.real" && cat > "$S" <<'WS'
#!/bin/sh
shift 2; for n in "$@"; do printf '4102444800.000000000 %s\0' "$n"; done
WS
chmod 755 "$S"'''


@pytest.fixture(params=["docker-volume", "podman-volume"])
def volume_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                  ) -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.skip("calls are root in the container only when the engine runs as root")
    yield from using_engine(request, monkeypatch)


def _claude(project: Path, tmp_path: Path, engine: str) -> Claude:
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "workspace"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.yaml").write_text("hide: [secret.env]\n")
    (project / "secret.env").write_text("TOPSECRET=hunter2\n")
    claude = Claude(project, tmp_path)
    claude.env["WORKSPACE_ENGINE"] = engine.split("-")[0]
    assert claude.start().returncode == 0
    return claude


def test_review_runs_no_program_the_sandbox_planted(ws, project: Path, tmp_path: Path,
                                                    volume_engine: str):
    claude = _claude(project, tmp_path, volume_engine)
    planted = claude.bash("echo x > new.txt; " + PLANT)
    assert planted.returncode == 0, planted.stderr
    ws("status")                                   # the user reviews: nothing committed
    reached = {"wrote the real project": (project / "PWNED").exists(),
               "copied a hidden file into view": (project / "LEAKED").exists()}
    assert not any(reached.values()), reached


def test_forged_births_lose_no_real_edit(ws, project: Path, tmp_path: Path,
                                         volume_engine: str):
    (project / "a.txt").write_text("hi\n")
    claude = _claude(project, tmp_path, volume_engine)
    assert claude.bash("echo sandbox-line >> a.txt; " + FORGE).returncode == 0
    time.sleep(0.05)
    with open(project / "a.txt", "a") as f:          # the user's edit, after the copy-up
        f.write("USER-EDIT\n")
    ws("commit")
    assert "USER-EDIT" in (project / "a.txt").read_text(), "the user's real edit was lost"


WRAP = r'''for p in stat find tar; do S=$(command -v $p); mv "$S" "$S.real" && cat > "$S" <<WS
#!/bin/sh
touch /run/ran-$p
exec "\$0.real" "\$@"
WS
chmod 755 "$S"; done'''


def test_export_runs_none_of_the_containers_programs(ws, project: Path, tmp_path: Path,
                                                     volume_engine: str):
    """The class: the export reads the volume with a fresh container of the session's image
    (the volume read-only); whatever a call replaced in the session's container never runs."""
    claude = _claude(project, tmp_path, volume_engine)
    assert claude.bash("mkdir -p d && echo x > d/new.txt; " + WRAP).returncode == 0
    shown = ws("status").stdout
    assert "added:     d/ (1 file)" in shown, shown
    ran = claude.bash("ls /run/ran-* 2>/dev/null; echo listed")
    assert ran.stdout.strip() == "listed", ran.stdout


def test_a_birth_after_the_export_is_no_birth(tmp_path: Path):
    from manager.engines.container.upper import parse_births

    now = time.time_ns()
    raw = (f"{now // 10**9 - 5}.000000001 ./a\0"
           f"4102444800.000000000 ./forged\0-1 ./unknown\0").encode()
    births = parse_births(raw, tmp_path, now)
    assert births == {str(tmp_path / "a"): (now // 10**9 - 5) * 10**9 + 1}
