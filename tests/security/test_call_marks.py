"""Attack pass 3: the container's call marks are read on the host, through whatever the
container made of them.

``/run/ws-calls`` is the host directory ``sandbox/calls``, writable inside the container.
The entry script (engines/container/enter.sh) reads the call's final directory from
``calls/ID.m`` on the host with ``read -r line <"$mark"``, which follows a symlink the
command put there (the command knows ID: ``$WS_CALL_ID``). The line read from the host
file becomes the client's recorded cwd (finish.sh, when it starts with ``/``) and the next
call prints it ("workspace: LINE does not exist in the sandbox"): the first line of any
host file the user can read, hidden ones included, reaches the agent. The session's
calls then all fail (exit 125) until the user moves the client.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.claude.conftest import Claude
from tests.engines.conftest import using_engine

pytestmark = [pytest.mark.engine, pytest.mark.as_user]   # rootless podman too

SECRET = "/netrc-secret password hunter2"


@pytest.fixture(params=["docker", "podman"])
def container_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                     ) -> Iterator[str]:
    yield from using_engine(request, monkeypatch)


def test_a_symlinked_call_mark_reads_no_host_file(project: Path, tmp_path: Path,
                                                  container_engine: str):
    netrc = Path(os.environ["HOME"]) / ".netrc"          # hidden by default
    netrc.write_text(SECRET + "\nmachine example.com\n")
    claude = Claude(project, tmp_path)
    claude.env["WORKSPACE_ENGINE"] = container_engine
    assert claude.start().returncode == 0
    seen = claude.bash("cat ~/.netrc; echo")
    assert "hunter2" not in seen.stdout                   # the mask holds inside
    claude.bash(f'ln -sf {netrc} "/run/ws-calls/$WS_CALL_ID.m"; echo planted')
    after = claude.bash("pwd")
    shown = after.stdout + after.stderr
    assert "hunter2" not in shown, "the hidden file's first line reached the sandboxed side"
    assert after.returncode == 0, f"the session's calls no longer run: {shown}"


def test_no_kind_of_mark_stops_or_steers_the_calls(project: Path, tmp_path: Path,
                                                   container_engine: str):
    """The class: whatever the container makes of its mark is data, read only when it is a
    regular file at the mark's own path. A FIFO blocked the host's read, a device (/dev/zero:
    a line that never ends) was read by the host's user, root in this run."""
    claude = Claude(project, tmp_path)
    claude.env["WORKSPACE_ENGINE"] = container_engine
    assert claude.start().returncode == 0
    plants = {"fifo": 'mkfifo "$m"', "directory": 'mkdir "$m"',
              "overlong": 'printf "/%05000d\\n" 0 >"$m"', "relative": 'echo etc >"$m"'}
    if os.geteuid() == 0 and container_engine == "docker":   # root inside, with CAP_MKNOD
        plants["device"] = 'mknod "$m" c 1 5'
    for kind, plant in plants.items():
        answer = claude.pre_bash('trap - EXIT; m="/run/ws-calls/$WS_CALL_ID.m"; rm -f "$m"; '
                                 f'{plant} && echo planted')
        run = claude.shell(answer.command, timeout=30)
        assert (run.returncode, run.stdout.strip()) == (0, "planted"), (kind, run)
        after = claude.bash("pwd")
        assert (after.returncode, after.stdout.strip()) == (0, str(project)), (kind, after)
    # The mark is read where only the host writes (marks/): an ordinary cd is still followed.
    (project / "sub").mkdir()
    assert claude.bash("cd sub").cwd == str(project / "sub")
