"""Attack pass 7: gc reads the containers of its state directory as the text of ``ps -a
--filter label=org.workspace.state=STATE --format '{{.ID}} {{.Names}} <session label>'`` and
takes every line of three words as one (engines/container/cli.py ``labelled``). A label is any
string, a newline included, so one container whose session label is ``zz\\nID NAME ghost``
makes a second row naming any other container by id: gc finds no session ``ghost`` and runs
``docker rm -f -v ID`` on it (a container of the user's own, of another state directory's
session, its anonymous volumes with it).

The labels need no ``--label`` on a command line: an image's labels become its containers'. A
hostile agent's image (pulled, or built here) labelled so is started by ``docker run -d IMAGE``,
a passthrough form (``run`` is judged on ``--name``/``--label`` only), which the docs say is
sandboxed for anything labelled ``org.workspace.*``."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from manager.session import paths
from tests.claude.conftest import Claude

pytestmark = [pytest.mark.engine, pytest.mark.as_user]

BASE = "workspace-sandbox:latest"


def docker(*args: str, input: str | None = None) -> str:
    return subprocess.run(["docker", *args], check=True, capture_output=True, text=True,
                          input=input, timeout=120).stdout.strip()


@pytest.fixture
def victim() -> Iterator[tuple[str, str]]:
    """A container of the user's own: no label of ours."""
    name = f"users-own-{uuid.uuid4().hex[:8]}"
    ident = docker("run", "-d", "--name", name, "--entrypoint", "sleep", BASE, "600")[:12]
    yield ident, name
    subprocess.run(["docker", "rm", "-f", name], capture_output=True)


@pytest.fixture
def forged_image(victim: tuple[str, str]) -> Iterator[str]:
    image = f"agents-image-{uuid.uuid4().hex[:8]}:v1"
    session = f"zz\n{victim[0]} {victim[1]} ghost"
    subprocess.run(["docker", "build", "-q", "--label", f"org.workspace.state={paths.state_home()}",
                    "--label", f"org.workspace.session={session}", "-t", image, "-"],
                   input=f"FROM {BASE}\n", text=True, check=True, capture_output=True,
                   env={**__import__("os").environ, "DOCKER_BUILDKIT": "0"}, timeout=300)
    yield image
    for cid in docker("ps", "-aq", "--filter", f"ancestor={image}").split():
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True)
    subprocess.run(["docker", "rmi", "-f", image], capture_output=True)


def test_gc_removes_only_containers_a_label_names(ws, victim: tuple[str, str]):
    """Whoever reaches the daemon (the overlay sandbox does) labels a container so."""
    ident, name = victim
    forger = docker("run", "-d", "--label", f"org.workspace.state={paths.state_home()}",
                    "--label", f"org.workspace.session=zz\n{ident} {name} ghost",
                    "--entrypoint", "sleep", BASE, "600")
    try:
        ws("gc")
        left = docker("ps", "-a", "--filter", f"id={ident}", "--format", "{{.Names}}")
        assert left == name, "gc removed a container no label of ours names"
    finally:
        subprocess.run(["docker", "rm", "-f", forger], capture_output=True)


def test_a_passthrough_run_of_an_image_labelled_as_ours(project: Path, tmp_path: Path, ws,
                                                        victim: tuple[str, str],
                                                        forged_image: str):
    """The agent's way to that label: ``docker run -d IMAGE``, judged by the real hook."""
    claude = Claude(project, tmp_path)
    claude.env["WORKSPACE_ENGINE"] = "overlay"
    assert claude.start().returncode == 0
    answer = claude.pre_bash(f"docker run -d {forged_image} sleep 600")
    assert answer.returncode == 0
    passed = "updatedInput" not in answer.spec and answer.decision != "deny"
    if passed:   # the client runs it as written, on the host
        claude.shell(f"docker run -d {forged_image} sleep 600")
    ws("gc")
    left = docker("ps", "-a", "--filter", f"id={victim[0]}", "--format", "{{.Names}}")
    assert not passed and left == victim[1], {"run passed through": passed,
                                             "victim left": left}
