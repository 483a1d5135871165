"""attack5: with ``network: off`` (or a list of hosts) passthrough forms still connect out.

The network setting confines sandboxed commands; the passthrough judge never reads it. So
with ``network: off`` the hook lets ``docker run --rm IMAGE python3 -c 'socket...'`` run on
the host (reproduced as root, overlay engine: "CONNECTED OUT ('1.1.1.1', 53)" while the
sandbox's own curl could not even resolve), ``docker pull``/``push``/``search`` reach
registries, and ``gh api --method POST /gists --field ...`` sends what the agent chose to
GitHub: connections the setting says never happen, none in the egress record. Class: a
passthrough form that uses the network while ``network`` is not ``open`` (podman too: left
out here, where its lookup would make a rootless store in the test's HOME).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.claude.conftest import Claude

pytestmark = [pytest.mark.engine, pytest.mark.as_user]

NETWORKED = ["docker run --rm workspace-sandbox:latest true", "docker image pull busybox",
             "docker pull alpine", "docker push example.com/x", "docker search alpine",
             "gh api --method POST /gists --field public=false", "gh pr list",
             "gh api /user", "sudo -n docker run --rm alpine true"]


@pytest.mark.parametrize("setting", ["off", "[pypi]"])
def test_networked_passthrough_forms_are_sandboxed_when_the_network_is_not_open(
        project: Path, tmp_path: Path, overlay_engine: str, setting: str):
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "workspace"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.yaml").write_text(f"network: {setting}\n")
    claude = Claude(project, tmp_path)
    assert claude.start().returncode == 0
    passed = []
    for form in NETWORKED:
        answer = claude.pre_bash(form)
        assert answer.returncode == 0, answer.stderr
        if answer.decision != "deny" and not (
                "updatedInput" in answer.spec and "finish.sh" in answer.command):
            passed.append(form)
    assert not passed, f"ran on the host, network {setting}: {passed}"
