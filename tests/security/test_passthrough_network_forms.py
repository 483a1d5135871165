"""Issue 20: with ``network`` not ``open``, only passthrough forms that stay on this host pass.

The class (attack pass 5, test_passthrough_network_off.py): a passthrough form runs on the
host, outside the network confinement. The rule (manager/claude/netreach.py) is checked here
from both sides by the real hook: forms that stay on the host still pass with the network
off; a daemon that is not local (``DOCKER_HOST``, a docker context, ``CONTAINER_HOST``, a
containers.conf with ``remote = true``) makes every container form one that connects out;
the effective setting includes Claude Code's ``allowedDomains`` (``network`` set nowhere),
and a change of those settings mid-session is seen at the next call.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.claude.conftest import Claude

pytestmark = [pytest.mark.engine, pytest.mark.as_user]

LOCAL = ["docker ps -a", "docker images", "docker inspect no-such-ctr", "docker logs --tail 5 ctr",
         "docker rm -f no-such-ctr", "docker stop -t 1 no-such-ctr", "docker system df",
         "docker run --rm --network none --pull never workspace-sandbox:latest true",
         "gh --version", "sudo -n docker ps"]
NETWORKED = ["docker run --rm --network none workspace-sandbox:latest true",
             "docker run --rm --pull never workspace-sandbox:latest true",
             "docker create --network=bridge --pull=never img", "docker start ctr",
             "docker exec ctr true", "docker network connect bridge ctr", "docker unpause ctr",
             "gh auth status", "gh release list"]


def _passes(answer) -> bool:
    assert answer.returncode == 0 and answer.decision != "deny", answer.json
    return not ("updatedInput" in answer.spec and "finish.sh" in answer.command)


def _session(project: Path, tmp_path: Path, setting: str | None) -> Claude:
    if setting is not None:
        config = Path(os.environ["XDG_CONFIG_HOME"]) / "workspace"
        config.mkdir(parents=True, exist_ok=True)
        (config / "config.yaml").write_text(f"network: {setting}\n")
    claude = Claude(project, tmp_path)
    assert claude.start().returncode == 0
    return claude


def test_forms_that_stay_on_the_host_pass_with_the_network_off(project: Path, tmp_path: Path,
                                                                overlay_engine: str):
    claude = _session(project, tmp_path, "off")
    wrong = {form: passed for form in LOCAL + NETWORKED
             if (passed := _passes(claude.pre_bash(form))) != (form in LOCAL)}
    assert not wrong, f"form -> passed through: {wrong}"


def test_a_daemon_elsewhere_makes_every_form_connect_out(project: Path, tmp_path: Path,
                                                         overlay_engine: str):
    claude = _session(project, tmp_path, "off")
    docker_config = tmp_path / "docker-config"
    docker_config.mkdir()
    (docker_config / "config.json").write_text(json.dumps({"currentContext": "remote"}))
    conf = tmp_path / "containers.conf"
    conf.write_text("[engine]\n  remote = true  # podman talks to a service\n")
    base = dict(claude.env)
    for env, form in [({"DOCKER_HOST": "tcp://192.0.2.1:2375"}, "docker ps"),
                      ({"DOCKER_CONTEXT": "remote"}, "docker images"),
                      ({"DOCKER_CONFIG": str(docker_config)}, "docker ps"),
                      ({"CONTAINER_HOST": "ssh://u@192.0.2.1/run/podman.sock"}, "docker ps"),
                      ({"CONTAINER_CONNECTION": "remote"}, "podman ps"),
                      ({"CONTAINERS_CONF": str(conf)}, "podman images")]:
        claude.env = dict(base, **env)
        assert not _passes(claude.pre_bash(form)), (env, form)
    claude.env = dict(base, DOCKER_HOST="unix:///var/run/docker.sock")
    assert _passes(claude.pre_bash("docker ps"))


def test_claude_allowed_domains_count_and_their_change_is_seen(project: Path, tmp_path: Path,
                                                               overlay_engine: str):
    """``network`` set nowhere: Claude Code's allowedDomains make it a list (egress.launch);
    the hook's cached settings are stamped with those files, so removing them is seen."""
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"sandbox": {"network": {"allowedDomains": ["pypi.org"]}}}))
    claude = _session(project, tmp_path, None)
    assert not _passes(claude.pre_bash("gh pr list"))
    assert _passes(claude.pre_bash("docker ps"))
    settings.write_text(json.dumps({"permissions": {}}))
    assert _passes(claude.pre_bash("gh pr list")), "the change of settings was not seen"


def test_with_the_network_open_networked_forms_still_pass(project: Path, tmp_path: Path,
                                                          overlay_engine: str):
    claude = _session(project, tmp_path, "open")
    for form in ("gh pr list", "docker pull alpine", "docker run --rm -e A=1 alpine true"):
        assert _passes(claude.pre_bash(form)), form
