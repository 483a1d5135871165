"""attack4: passthrough `docker network disconnect|connect` acts on the session's own container.

ownctr.touches_own checks container, volume and image operands, but not the `network`
group's `connect`/`disconnect`, whose operand is a container. The session's container runs
with `--network none` (network off, and the default `container.network: false`); docker lets
a host-side `network disconnect none CTR` and then `network connect bridge CTR` give it an
interface: later sandboxed calls reach the network directly (no proxy, no egress record),
though the setting says off. Both are allowed passthrough forms, so the hook lets them run
on the host.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from manager.engines.container.base import resource_name
from tests.claude.conftest import Claude
from tests.engines.conftest import using_engine

pytestmark = [pytest.mark.engine]


@pytest.fixture(params=["docker"])
def docker_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                  ) -> Iterator[str]:
    yield from using_engine(request, monkeypatch)


def test_network_forms_naming_the_sessions_container_are_sandboxed(project: Path, tmp_path: Path,
                                                                 docker_engine: str):
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "workspace"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.yaml").write_text("network: off\n")
    claude = Claude(project, tmp_path)
    claude.env["WORKSPACE_ENGINE"] = "docker"
    assert claude.start().returncode == 0
    assert claude.bash("true").returncode == 0                        # the container is up
    passed = []
    ours = resource_name("sess-1")
    for command in (f"docker network disconnect none {ours}",
                    f"docker network connect bridge {ours}"):
        answer = claude.pre_bash(command)
        if "updatedInput" not in answer.spec and answer.decision != "deny":
            passed.append(command)
        claude.shell(answer.command if "updatedInput" in answer.spec else command)
    devices = claude.bash("cat /proc/net/dev").stdout
    gateway = subprocess.run(["docker", "network", "inspect", "bridge", "--format",
                              "{{(index .IPAM.Config 0).Gateway}}"], capture_output=True,
                             text=True, check=False).stdout.strip()
    with socket.socket() as server:   # a host service the sandbox must not reach
        server.bind(("0.0.0.0", 0))
        server.listen(1)
        port = server.getsockname()[1]
        probe = claude.bash(f"python3 -c 'import socket; socket.create_connection("
                            f"(\"{gateway}\", {port}), timeout=5); print(\"CONNECTED\")'")
    reached = {"passed through to the host": passed,
               "the network-off sandbox has an interface": "eth0" in devices,
               "connected to a host port": "CONNECTED" in probe.stdout}
    assert not any(reached.values()), f"{reached}\n{devices}"

