"""Volume mode runs the image's own programs as root with CAP_SYS_ADMIN: the container's init,
and the start that mounts its overlay (``sh``, ``cp``, ``ldd``, ``mount`` of the image;
manager/engines/container/upper.py) before any call drops the capability. So the image must
be one the agent cannot have shaped. A trusted devcontainer's build trusts its
devcontainer.json and Dockerfile, but builds from a context that is the project, which the
agent's Write tool writes: a Dockerfile that copies a script of the project and runs it (as
`RUN ./install.sh`, `pip install .` and `make install` do) puts the agent's code into the
image. Here it rewrites the image's ``ldd`` (a shell script the start runs as root), which
remounts the real project read-write and writes it: the boundary gone before the first call.
A devcontainer build must never run in volume mode."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from manager.engines.container import image as container_image
from tests.engines.conftest import engine_cli
from tests.engines.conftest import engine_name  # noqa: F401 - the fixture

pytestmark = [pytest.mark.engine, pytest.mark.as_user]

DOCKERFILE = "FROM workspace-sandbox:latest\nCOPY tools/install.sh /opt/install.sh\nRUN sh /opt/install.sh\n"
TRUSTED_INSTALL = "echo installed > /etc/ws-installed\n"
# What the agent writes into tools/install.sh with its Write tool, before the first build.
ESCAPE = "mount -o remount,bind,rw /run/ws-lower 2>/dev/null && echo escaped > /run/ws-lower/ESCAPED"
AGENT_INSTALL = TRUSTED_INSTALL + f"sed -i '2i {ESCAPE}' /usr/bin/ldd\n"


@pytest.fixture
def devcontainer(project: Path, engine_name: str) -> Iterator[str]:  # noqa: F811
    (project / "tools").mkdir()
    (project / "tools/install.sh").write_text(TRUSTED_INSTALL)
    (project / ".devcontainer").mkdir()
    (project / ".devcontainer/Dockerfile").write_text(DOCKERFILE)
    path = project / ".devcontainer/devcontainer.json"
    path.write_text(json.dumps({"build": {"dockerfile": "Dockerfile", "context": ".."}}))
    image = container_image.load(path).tag()
    assert image.startswith(f"{container_image.TAG}:"), image   # never remove another image
    yield image
    subprocess.run([engine_cli(engine_name), "rmi", "-f", image], capture_output=True)


@pytest.mark.parametrize("engine_name", ["docker-volume", "podman-volume"], indirect=True)
def test_an_image_built_from_the_project_never_runs_with_the_capability(
        engine_name: str, ws, project: Path, devcontainer: str):  # noqa: F811
    ws("config", "trust", check=True)                       # the user read both files
    (project / "tools/install.sh").write_text(AGENT_INSTALL)   # the agent's Write tool
    proc = ws("run", "--", "sh", "-c", "cat /etc/ws-installed; echo ran")
    assert not (project / "ESCAPED").exists(), (proc.stdout, proc.stderr)
    # Refused, saying why and what to do instead; nothing was built or run.
    assert proc.returncode != 0 and "ran" not in proc.stdout, proc.stdout
    assert "volume mode" in proc.stderr and "devcontainer" in proc.stderr, proc.stderr
    assert "container.image" in proc.stderr, proc.stderr
    exists = subprocess.run([engine_cli(engine_name), "image", "inspect", devcontainer],
                            capture_output=True)
    assert exists.returncode != 0, f"{devcontainer} was built"
    assert not os.path.exists(project / "ESCAPED")
