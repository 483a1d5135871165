"""Attack pass 7: volume mode drops CAP_SYS_ADMIN from the bounding set of a root call only
(enter.sh: ``--bounding-set -sys_admin`` when U is 0; another uid gets ``--inh-caps=-all
--ambient-caps=-all``). A call of another uid (docker run by an ordinary user; rootless podman)
keeps CAP_SYS_ADMIN in its bounding set and no ``no_new_privs``: a setuid-root program of the
image makes it root with CAP_SYS_ADMIN. The default image's setuid programs (mount, umount,
su) refuse an ordinary user, but the image is the project's devcontainer once trusted, and
those give their user sudo without a password (every devcontainers/* image does): here a
setuid copy of bash stands for it. The call then unmounts the hide masks and remounts the
real project's bind read-write and writes it, as the pass-5 and pass-6 reproductions did as
root. Every call of a volume-mode container must be unable to get CAP_SYS_ADMIN back."""

from __future__ import annotations

import os
import shlex
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.claude.conftest import Claude
from tests.engines.conftest import engine_cli
from tests.engines.conftest import engine_name  # noqa: F401 - the fixture

pytestmark = [pytest.mark.engine, pytest.mark.as_user]

ROOT = ('python3 -c "import os; os.setgid(0); os.setuid(0); os.execvp(\'sh\', [\'sh\', \'-c\', '
        '\'grep CapEff /proc/self/status; umount /run/ws-lower/secret.env; cat /run/ws-lower/secret.env; '
        'mount -o remount,bind,rw /run/ws-lower && echo escaped > /run/ws-lower/ESCAPED\'])"')
ESCAPE = f"rootsh -p -c {shlex.quote(ROOT)}; true"


@pytest.fixture
def sudo_image(engine_name: str) -> Iterator[str]:  # noqa: F811
    cli = engine_cli(engine_name)
    image = f"localhost/sudo-like-{uuid.uuid4().hex[:8]}:latest"
    built = subprocess.run([cli, "build", "-q", "--network", "none", "-t", image, "-"], capture_output=True,
                   text=True, timeout=300, env={**os.environ, "DOCKER_BUILDKIT": "0"},
                   input="FROM workspace-sandbox:latest\n"
                         "RUN cp /bin/bash /usr/local/bin/rootsh && chmod 4755 /usr/local/bin/rootsh\n")
    assert built.returncode == 0, built.stderr
    yield image
    subprocess.run([cli, "rmi", "-f", image], capture_output=True)


def hidden_secret_session(engine: str, image: str, tmp_path: Path, project: Path) -> Claude:
    """A session of ``image`` whose project holds a hidden ``secret.env`` (hunter2)."""
    (project / "secret.env").write_text("TOPSECRET=hunter2\n")
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "workspace"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.yaml").write_text(f"hide: [secret.env]\ncontainer.image: {image}\n")
    claude = Claude(project, tmp_path, engine=engine_cli(engine))
    assert claude.start().returncode == 0
    return claude


@pytest.mark.parametrize("engine_name", ["docker-volume", "podman-volume"], indirect=True)
def test_no_call_gets_cap_sys_admin_back_through_a_setuid_program(
        engine_name: str, sudo_image: str, tmp_path: Path, project: Path):  # noqa: F811
    claude = hidden_secret_session(engine_name, sudo_image, tmp_path, project)
    run = claude.bash(ESCAPE)
    reached = {"CAP_SYS_ADMIN": any(line.startswith("CapEff:") and int(line.split()[1], 16) & (1 << 21)
                                    for line in run.stdout.splitlines()),
               "read the hidden file": "hunter2" in run.stdout,
               "wrote the real project": (project / "ESCAPED").exists()}
    assert not any(reached.values()), (reached, run.stdout, run.stderr)
