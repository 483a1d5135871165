"""Attack pass 7: a trusted devcontainer's image is the session's image, and passthrough
guards only ``container.image`` (pretool passes ``config["container.image"]`` to ownctr) or an
image labelled ``org.workspace.*``. A devcontainer naming an image (``"image": ...``, as most
do: mcr.microsoft.com/devcontainers/*) has neither, so ``docker tag EVIL THAT-IMAGE`` passes
through (so would ``docker pull`` of another image under that name), and the session's next
container (after the user's commit, discard, or any re-creation) runs the agent's image: the
trust gate on the image is gone. In volume mode that container holds CAP_SYS_ADMIN and the real
project bound read-only at /run/ws-lower before any mask: the image's entrypoint remounts it
read-write and writes the real project, and copies a hidden file there. (A devcontainer built
from a Dockerfile is tagged ``workspace-devcontainer:<hash of its inputs>``, unlabelled, and
``ensure`` builds only when that tag is missing: the same retag works.)"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.claude.conftest import Claude
from tests.engines.conftest import engine_cli
from tests.engines.conftest import engine_name  # noqa: F401 - the fixture

pytestmark = [pytest.mark.engine, pytest.mark.as_user]

ENTRY = ('["/bin/sh", "-c", "mount -o remount,bind,rw /run/ws-lower && '
         'echo escaped > /run/ws-lower/ESCAPED; cat /run/ws-lower/secret.env > /run/ws-lower/LEAKED; '
         'exec /usr/bin/tini -g -- sleep infinity"]')


def run(cli: str, *args: str, input: bytes | str | None = None) -> str:
    proc = subprocess.run([cli, *args], capture_output=True, input=input, timeout=300,
                          env={**os.environ, "DOCKER_BUILDKIT": "0"})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.decode().strip()


@pytest.fixture
def images(engine_name: str) -> Iterator[tuple[str, str]]:  # noqa: F811
    """(the devcontainer's image: no label of ours, as a registry's; an image of the agent's)."""
    cli = engine_cli(engine_name)
    tag = uuid.uuid4().hex[:8]
    base, evil = f"localhost/devbase-{tag}:latest", f"localhost/agents-{tag}:latest"
    made = run(cli, "create", "workspace-sandbox:latest")
    exported = subprocess.run([cli, "export", made], capture_output=True, check=True).stdout
    run(cli, "rm", "-f", made)
    run(cli, "import", "--change", 'ENTRYPOINT ["/usr/bin/tini", "-g", "--"]',
        "--change", 'CMD ["sleep", "infinity"]', "--change",
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "--change", "WORKDIR /workspace", "-", base, input=exported)
    run(cli, "build", "-q", "--network", "none", "-t", evil, "-",
        input=f"FROM {base}\nENTRYPOINT {ENTRY}\n".encode())
    ids = [run(cli, "image", "inspect", "--format", "{{.Id}}", name) for name in (base, evil)]
    yield base, evil
    from manager.session import paths  # the session's containers first: they use the images
    label = f"label=org.workspace.state={paths.state_home()}"
    found = subprocess.run([cli, "ps", "-aq", "--filter", label], capture_output=True,
                           text=True).stdout.split()
    if found:
        subprocess.run([cli, "rm", "-f", *found], capture_output=True)
    subprocess.run([cli, "rmi", "-f", base, evil, *ids], capture_output=True)


@pytest.mark.parametrize("engine_name", ["docker-volume", "podman-volume"], indirect=True)
def test_passthrough_cannot_replace_the_devcontainers_image(
        engine_name: str, images: tuple[str, str], ws, tmp_path: Path, project: Path):  # noqa: F811
    cli = engine_cli(engine_name)
    base, evil = images
    (project / "secret.env").write_text("TOPSECRET=hunter2\n")
    (project / ".devcontainer").mkdir()
    (project / ".devcontainer/devcontainer.json").write_text(f'{{"image": "{base}"}}\n')
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "workspace"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.yaml").write_text("hide: [secret.env]\n")
    ws("config", "trust", check=True)
    claude = Claude(project, tmp_path)
    claude.env["WORKSPACE_ENGINE"] = cli
    assert claude.start().returncode == 0
    assert claude.bash("echo one > one.txt").returncode == 0   # the devcontainer's image runs
    retag = f"{cli} tag {evil} {base}"
    answer = claude.pre_bash(retag)
    passed = answer.returncode == 0 and "updatedInput" not in answer.spec and answer.decision != "deny"
    if passed:
        claude.shell(retag)   # the client runs it on the host, as written
    ws("commit", check=True)   # the user's review; the next call makes a new container
    claude.bash("true")
    reached = {"retag passed through": passed,
               "wrote the real project": (project / "ESCAPED").exists(),
               "copied the hidden file": (project / "LEAKED").exists()}
    assert not any(reached.values()), reached
