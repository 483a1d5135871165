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

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.claude.conftest import Claude
from tests.engines.conftest import using_engine

pytestmark = pytest.mark.engine

ESCAPE = ('{cli} exec -u 0 workspace-sess-1 sh -c "umount /run/ws-lower/secret.env; '
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
    run = claude.bash(ESCAPE.format(cli=cli))
    reached = {"read the hidden file": "hunter2" in run.stdout,
               "wrote the real project": (project / "ESCAPED").exists()}
    assert not any(reached.values()), reached
