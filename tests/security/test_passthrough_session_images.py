"""Issue 20, attack pass 7: every image a session may run is workspace's own, whatever names it.

The passthrough judge protected only ``container.image``; a devcontainer's image (a registry's,
unlabelled, or a Dockerfile's build tag ``workspace-devcontainer:<hash>``) could be retagged,
pulled over or removed from the host. The judge now takes the names from the engine's own
choice (``image.runnable``), compares them as the engines resolve them, sandboxes a run/create
that may pull one, and sandboxes every image-writing form when they cannot be read. Judged by
the real hook, with the real engine resolving ids; controls pass (the rule is not "sandbox all").
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from manager.engines.container import image
from tests.claude.conftest import Claude
from tests.engines.conftest import engine_cli
from tests.engines.conftest import engine_name  # noqa: F401 - the fixture

pytestmark = [pytest.mark.engine, pytest.mark.as_user]

BASE = "workspace-sandbox:latest"


def session(project: Path, tmp_path: Path, devcontainer: str) -> Claude:
    """A session (network open: only the image rule decides) of a project whose
    devcontainer.json is ``devcontainer`` (not trusted: it may be, later)."""
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "workspace"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.yaml").write_text("network: open\n")
    (project / ".devcontainer").mkdir(exist_ok=True)
    (project / ".devcontainer/devcontainer.json").write_text(devcontainer)
    claude = Claude(project, tmp_path)
    claude.env["WORKSPACE_ENGINE"] = "overlay"
    assert claude.start().returncode == 0
    return claude


def passes(claude: Claude, form: str) -> bool:
    answer = claude.pre_bash(form)
    assert answer.returncode == 0, answer.stderr
    return answer.decision != "deny" and "updatedInput" not in answer.spec


def build(cli: str, name: str) -> None:
    """An image of its own id and no label of ours (one built FROM the sandbox image carries
    its ``org.workspace.hash``, which the judge already protects): an empty import."""
    empty = subprocess.run(["tar", "cf", "-", "-T", "/dev/null"], capture_output=True,
                           check=True).stdout
    subprocess.run([cli, "import", "--change", f"LABEL n={name}", "-", name], input=empty,
                   check=True, capture_output=True, timeout=120)


@pytest.fixture
def named(engine_name: str) -> Iterator[tuple[str, str, str]]:  # noqa: F811
    """(the engine's cli, a devcontainer's image (unqualified, unlabelled), an agent's)."""
    cli = engine_cli(engine_name)
    name, agents = (f"{what}-{uuid.uuid4().hex[:8]}" for what in ("devimg", "agents"))
    for made in (name, agents):
        build(cli, made)
    yield cli, name, agents
    subprocess.run([cli, "rmi", "-f", name, agents], capture_output=True)


@pytest.mark.parametrize("engine_name", ["docker", "podman"], indirect=True)
def test_a_devcontainers_image_by_any_spelling(named: tuple[str, str, str], project: Path,
                                               tmp_path: Path):
    cli, name, agents = named
    claude = session(project, tmp_path, f'{{"image": "{name}"}}\n')
    ident = subprocess.run([cli, "image", "inspect", "--format", "{{.Id}}", name],
                           check=True, capture_output=True, text=True).stdout.strip()
    sandboxed = [f"{cli} tag {agents} {name}", f"{cli} tag {agents} {name}:latest",
                 f"{cli} image tag {agents} docker.io/library/{name}:latest",
                 f"{cli} tag {agents} localhost/{name}", f"{cli} pull {name}",
                 f"{cli} pull -q docker.io/{name}:latest", f"{cli} rmi {name}",
                 f"{cli} image rm {ident}", f"{cli} run --rm --pull always {name} true",
                 f"{cli} create --pull=newer {name} true"]
    controls = [f"{cli} tag {agents} other-{name}", f"{cli} tag {agents} {name}:v2",
                f"{cli} run --rm --pull never {name} true", f"{cli} images"]
    wrong = {form: passes(claude, form) for form in sandboxed + controls}
    wrong = {form: passed for form, passed in wrong.items() if passed != (form in controls)}
    assert not wrong, f"form -> passed through: {wrong}"


@pytest.mark.parametrize("engine_name", ["docker"], indirect=True)
def test_a_dockerfile_devcontainers_build_tag(engine_name: str, project: Path,  # noqa: F811
                                              tmp_path: Path):
    spec = '{"build": {"dockerfile": "Dockerfile"}}\n'
    (project / ".devcontainer").mkdir()
    (project / ".devcontainer/Dockerfile").write_text(f"FROM {BASE}\n")
    (project / ".devcontainer/devcontainer.json").write_text(spec)
    tag = image.load(project / ".devcontainer/devcontainer.json").tag()   # what ensure builds
    (project / ".devcontainer/devcontainer.json").unlink()
    claude = session(project, tmp_path, spec)
    agents = f"agents-{uuid.uuid4().hex[:8]}"
    build("docker", agents)
    try:
        assert not passes(claude, f"docker tag {agents} {tag}")
        assert passes(claude, f"docker tag {agents} {agents}:{tag[-8:]}")
    finally:
        subprocess.run(["docker", "rmi", "-f", agents], capture_output=True)


@pytest.mark.parametrize("engine_name", ["docker"], indirect=True)
def test_an_unreadable_devcontainer_protects_every_image(engine_name: str,  # noqa: F811
                                                         project: Path, tmp_path: Path):
    claude = session(project, tmp_path, '{"image": ')
    wrong = {form: passes(claude, form) for form in (
        f"docker tag {BASE} anything-{uuid.uuid4().hex[:6]}", "docker pull alpine",
        "docker rmi no-such-image-here", "docker ps")}
    assert wrong == {**{form: False for form in list(wrong)[:3]}, "docker ps": True}, wrong
