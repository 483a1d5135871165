"""Attack pass 7: in volume mode the session's container mounts the named volume at
``/run/ws-vol`` (upper/ and work/, 0700 root's) and leaves it there for every call. A call
that is root in the container (the engine run by root) reaches it past the overlay: it
renames ``/run/ws-vol/upper`` (the mounted overlay keeps working on the renamed directory) and
puts a file in its place. Every export (review, commit, discard: release exports first) then
fails ("the stream from the engine ended early"), with the hint to rerun "once it works",
which it never does: commit and discard are impossible until the user removes the volume by
hand, and status says "nothing pending" while the sandbox holds the call's changes. Nothing
a call does may make commit or discard impossible."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from manager.session import paths
from tests.claude.conftest import Claude
from tests.engines.conftest import engine_cli
from tests.engines.conftest import engine_name  # noqa: F401 - the fixture

pytestmark = pytest.mark.needs_root

SABOTAGE = ("echo change > new.txt; mv /run/ws-vol/upper /run/ws-vol/u2 && "
            ": > /run/ws-vol/upper; true")


@pytest.mark.parametrize("engine_name", ["docker-volume", "podman-volume"], indirect=True)
def test_a_call_cannot_make_discard_impossible(engine_name: str, ws, tmp_path: Path,  # noqa: F811
                                               project: Path):  # noqa: F811
    claude = Claude(project, tmp_path, engine=engine_cli(engine_name))
    claude.start()
    try:
        assert claude.bash(SABOTAGE).returncode == 0
        status = ws("status")
        discard = ws("discard", "--yes")
        assert discard.returncode == 0 and "new.txt" in status.stdout, \
            (status.stdout, status.stderr, discard.stderr)
    finally:   # what a failed discard leaves
        cli = engine_cli(engine_name)
        label = f"label=org.workspace.state={paths.state_home()}"
        for kind, listing in (("container", ["ps", "-aq"]), ("volume", ["volume", "ls", "-q"])):
            found = subprocess.run([cli, *listing, "--filter", label], capture_output=True,
                                   text=True).stdout.split()
            if found:
                subprocess.run([cli, kind, "rm", "-f", *found], capture_output=True)
