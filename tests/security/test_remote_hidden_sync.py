"""Attack pass 3: a remote engine receives the hidden files.

With a remote engine (issue 26) the project is sent into a volume of its own
(engines/container/remote.py: scan() and _pack() take every entry), hidden ones
included; the mask is mounted over them afterwards. So a hidden file's content leaves
this machine for the engine's disk, and whatever is root with CAP_SYS_ADMIN in the
session's container (a passthrough `docker exec -u 0`, or the export's programs once a
call replaced them) unmounts the mask and reads it.

The local daemon stands in for a remote one: ``unix:///run//docker.sock`` is not one of
the spellings remote.LOCAL_SOCKETS takes for local, so the session runs as remote.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from manager.engines.container.base import lower_volume_name
from manager.engines.container.base import resource_name
from manager.session import store
from tests.claude.conftest import Claude
from tests.engines.conftest import using_engine

pytestmark = [pytest.mark.engine, pytest.mark.as_user]

REMOTE = "unix:///run//docker.sock"


@pytest.fixture(params=["docker-volume"])
def remote_docker(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                  ) -> Iterator[str]:
    monkeypatch.setenv("DOCKER_HOST", REMOTE)
    yield from using_engine(request, monkeypatch)


def test_hidden_files_are_not_sent_to_a_remote_engine(project: Path, tmp_path: Path,
                                                      remote_docker: str):
    (project / "secret.env").write_text("TOPSECRET=hunter2\n")
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "workspace"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.yaml").write_text("hide: [secret.env]\n")
    claude = Claude(project, tmp_path)
    claude.env.update(WORKSPACE_ENGINE="docker", DOCKER_HOST=REMOTE)
    assert claude.start().returncode == 0
    assert "hunter2" not in claude.bash("cat secret.env; echo").stdout
    (session,), _ = store.list_sessions()
    assert (session.sandbox / "remote").exists(), "the session does not run as remote"
    sent = json.loads((session.sandbox / "lower.manifest").read_text())["entries"]
    leaked = claude.bash(f'docker exec -u 0 {resource_name("sess-1")} sh -c '
                         '"umount /run/ws-lower/secret.env; cat /run/ws-lower/secret.env"')
    reached = {"sent to the engine": "secret.env" in sent,
               "read back inside": "hunter2" in leaked.stdout}
    assert not any(reached.values()), reached


def test_no_hidden_content_reaches_the_remote_volume(project: Path, tmp_path: Path,
                                                     remote_docker: str):
    """The class: whatever the hide patterns name inside the project (a directory's whole
    tree, a glob) is neither listed as sent nor anywhere in the volume the engine holds."""
    (project / "keys" / "deep").mkdir(parents=True)
    (project / "keys" / "deep" / "id").write_text("hunter2-dir\n")
    (project / "server.pem").write_text("hunter2-glob\n")
    (project / "kept.txt").write_text("shown\n")
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "workspace"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.yaml").write_text("hide: [keys, '*.pem']\n")
    claude = Claude(project, tmp_path)
    claude.env.update(WORKSPACE_ENGINE="docker", DOCKER_HOST=REMOTE)
    assert claude.start().returncode == 0
    assert claude.bash("cat kept.txt").stdout == "shown\n"
    (session,), _ = store.list_sessions()
    sent = json.loads((session.sandbox / "lower.manifest").read_text())["entries"]
    assert "kept.txt" in sent
    assert not [rel for rel in sent if rel.startswith(("keys", "server.pem"))], sent
    volume = subprocess.run(["docker", "run", "--rm", "--network", "none", "-v",
                             f"{lower_volume_name('sess-1')}:/v:ro", "workspace-sandbox:latest",
                             "sh", "-c", "ls -R /v; cat /v/kept.txt; grep -r hunter2 /v; true"],
                            capture_output=True, text=True, check=True,
                            env=dict(os.environ, DOCKER_HOST=REMOTE))
    assert "shown" in volume.stdout and "hunter2" not in volume.stdout, volume.stdout
