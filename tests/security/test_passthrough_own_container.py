"""Attack pass 3: passthrough `docker exec` into the session's own container.

`docker`/`podman` are on the default passthrough list, and `exec CONTAINER CMD...` is
one of their allowed forms, whatever the container. The session's own container is one
(`workspace-<session>`, `docker ps` names it). In volume mode it holds CAP_SYS_ADMIN for
its overlay mount; the entry script drops it for calls (setpriv), but an exec that the
hook lets run on the host is not a call: it keeps it. It unmounts the hide mask over the
real project's bind (`/run/ws-lower`) and reads the hidden file, and remounts that bind
read-write and writes the real project, with no review and no commit. `-u 0` (`--user` is
an allowed option) makes it the container's root for rootless podman too: reproduced as
the ordinary user wstest (the file lands owned by the user's first subordinate id).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from manager.engines.container.base import resource_name
from tests.claude.conftest import Claude
from tests.engines.conftest import using_engine

pytestmark = [pytest.mark.engine, pytest.mark.as_user]   # rootless podman too

ESCAPE = ('{cli} exec -u 0 {name} sh -c "umount /run/ws-lower/secret.env; '
          'cat /run/ws-lower/secret.env; mount -o remount,rw,bind /run/ws-lower && '
          'echo escaped > /run/ws-lower/ESCAPED"')


@pytest.fixture(params=["docker-volume", "podman-volume"])
def volume_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                  ) -> Iterator[str]:
    yield from using_engine(request, monkeypatch)


def test_exec_into_the_sessions_own_container_is_sandboxed(project: Path, tmp_path: Path,
                                                            volume_engine: str):
    import os

    cli = volume_engine.split("-")[0]
    (project / "secret.env").write_text("TOPSECRET=hunter2\n")
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "workspace"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.yaml").write_text("hide: [secret.env]\n")
    claude = Claude(project, tmp_path)
    claude.env["WORKSPACE_ENGINE"] = cli
    assert claude.start().returncode == 0
    assert "hunter2" not in claude.bash("cat secret.env; echo").stdout   # the container is up
    run = claude.bash(ESCAPE.format(cli=cli, name=resource_name("sess-1")))
    reached = {"read the hidden file": "hunter2" in run.stdout,
               "wrote the real project": (project / "ESCAPED").exists()}
    assert not any(reached.values()), reached


def test_no_passthrough_form_acts_on_workspace_resources(project: Path, tmp_path: Path,
                                                        volume_engine: str):
    """The class: every form that names a container, volume or image is resolved by the
    engine the command would use (ids and their prefixes too); workspace's own, a missing
    name spelled as ours, and prune are sandboxed. Others, a missing name too, pass through."""
    cli = volume_engine.split("-")[0]
    claude = Claude(project, tmp_path)
    claude.env["WORKSPACE_ENGINE"] = cli
    assert claude.start().returncode == 0
    assert claude.bash("true").returncode == 0                            # the container is up
    ours = resource_name("sess-1")
    ident = subprocess.run([cli, "container", "inspect", "--format", "{{.Id}}", ours],
                           capture_output=True, text=True,
                           check=True).stdout.strip()
    image = "workspace-sandbox:latest"
    sandboxed = [f"{cli} exec -u 0 {ident[:12]} id", f"{cli} exec --user=0 {ident} id",
                 f"{cli} stop {ours}", f"{cli} container kill {ident[:8]}",
                 f"{cli} rm -f {ours}", f"sudo -n -n {cli} exec {ours} id",
                 f"{cli} rename {ours} x", f"{cli} volume rm {ours}",
                 f"{cli} run --rm --network container:{ours} {image} true",
                 f"{cli} rmi {image}", f"{cli} tag {image} {image}",
                 f"{cli} volume prune --force", f"{cli} exec workspace-sess-9 id",
                 f"{cli} ps; {cli} stop {ours}"]
    passing = [f"{cli} ps", f"{cli} inspect {ours}", f"{cli} images",
               f"{cli} exec no-such-container id", f"{cli} stop no-such-container"]
    for form in sandboxed + passing:
        answer = claude.pre_bash(form)
        assert answer.returncode == 0 and answer.decision != "deny", (form, answer)
        ran_inside = "finish.sh" in answer.command if "updatedInput" in answer.spec else False
        assert ran_inside == (form in sandboxed), (form, answer.json)
