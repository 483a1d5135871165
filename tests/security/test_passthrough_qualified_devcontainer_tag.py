"""Attack pass 9: pass 8's rule (workspace's own repositories, whatever the tag) compares the
repository as written, but podman resolves a short name to *any* local image whose name
ends in ``/NAME`` (here podman 4.3: ``podman image inspect attack9probe:t1`` finds
``example.com/zz/attack9probe:t1``). So ``podman tag AGENTS
example.com/zz/workspace-devcontainer:<hash>`` is no repository of ours and no name a
session runs: it passes through. Once the user commits and trusts the (benign) devcontainer,
``image.ensure`` asks podman for ``workspace-devcontainer:<hash>``, finds the agent's image,
builds nothing, and the next container runs it. Rule broken: no passthrough form changes
what the next container runs (attack pass 7/8)."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from manager.engines.container import image
from tests.engines.conftest import engine_name  # noqa: F401 - the fixture
from tests.security.test_passthrough_future_devcontainer_tag import future_tag
from tests.security.test_passthrough_future_devcontainer_tag import write_devcontainer
from tests.security.test_passthrough_session_images import build
from tests.security.test_passthrough_session_images import passes
from tests.security.test_passthrough_session_images import session

pytestmark = [pytest.mark.engine, pytest.mark.as_user]



@pytest.mark.parametrize("engine_name", ["podman"], indirect=True)
@pytest.mark.parametrize("prefix", ["example.com/zz/", "quay.io/"])
def test_a_qualified_name_of_our_repository_cannot_be_planted(
        engine_name: str, prefix: str, project: Path, tmp_path: Path):  # noqa: F811
    claude = session(project, tmp_path, "{}\n")
    (project / ".devcontainer/devcontainer.json").unlink()
    (project / ".devcontainer").rmdir()
    agents = f"agents-{uuid.uuid4().hex[:8]}"
    build("podman", agents)
    made: list[str] = []
    try:
        tag = future_tag(project)
        planted = prefix + tag
        form = f"podman tag {agents} {planted}"
        passed = passes(claude, form)
        runs_agents = False
        if passed:   # as the client would: run it; the user commits and trusts
            subprocess.run(["podman", "tag", agents, planted], check=True, capture_output=True)
            made.append(planted)
            spec = image.load(write_devcontainer(project))
            assert spec.tag() == tag
            image.ensure("podman", tag, spec, network=False)   # the next container start
            made.append(tag)   # built, if it was not found: ours to remove
            labels = subprocess.run(["podman", "image", "inspect", "--format",
                                     "{{json .Config.Labels}}", tag],
                                    capture_output=True, text=True, check=True).stdout
            runs_agents = f'"n":"{agents}"' in labels
        assert not (passed and runs_agents), (form, "passed through; the next container runs "
                                              "the agent's image")
    finally:
        subprocess.run(["podman", "rmi", "-f", agents, *made], capture_output=True)



@pytest.mark.parametrize("engine_name", ["podman"], indirect=True)
def test_a_future_devcontainers_ready_image_cannot_be_planted_under_another_registry(
        engine_name: str, ws, project: Path, tmp_path: Path):  # noqa: F811
    """The same resolution for a devcontainer that names a ready image (``"image"``: the form
    volume mode takes, whose programs run there as root with CAP_SYS_ADMIN), planted before
    the agent's devcontainer.json is committed: ``podman tag AGENTS example.com/zz/ORG/TOOL:1``
    passes, and podman then answers ``ORG/TOOL:1`` (``image_exists``: nothing to pull) with the
    agent's image. The judge cannot know a name no devcontainer names yet: the engine refuses an
    image that podman resolves to another registry's name."""
    wanted = f"org-{uuid.uuid4().hex[:8]}/tool:1"
    claude = session(project, tmp_path, "{}\n")
    (project / ".devcontainer/devcontainer.json").unlink()
    (project / ".devcontainer").rmdir()
    agents = f"agents-{uuid.uuid4().hex[:8]}"
    build("podman", agents)
    planted = "example.com/zz/" + wanted
    made: list[str] = []
    try:
        form = f"podman tag {agents} {planted}"
        passed = passes(claude, form)
        runs_agents = False
        if passed:   # then the user commits {"image": wanted} and trusts it
            subprocess.run(["podman", "tag", agents, planted], check=True, capture_output=True)
            made.append(planted)
            (project / ".devcontainer").mkdir()
            (project / ".devcontainer/devcontainer.json").write_text(f'{{"image": "{wanted}"}}\n')
            assert image.load(project / ".devcontainer/devcontainer.json").tag() == wanted
            # The judge could not know the name then; the engine must not take the agent's
            # image for it now (podman answers `wanted` with the planted one). A project of
            # its own: this one's session is the judge's.
            fresh = tmp_path / "fresh"
            (fresh / ".devcontainer").mkdir(parents=True)
            (fresh / ".devcontainer/devcontainer.json").write_text(f'{{"image": "{wanted}"}}\n')
            ws("config", "trust", cwd=fresh, check=True)
            ran = ws("run", "--", "true", cwd=fresh)
            runs_agents = ran.returncode == 0
            assert "another registry's image" in ran.stderr, ran.stderr
        assert not (passed and runs_agents), (form, "passed through; the devcontainer's "
                                              f"{wanted} is now the agent's image")
    finally:
        subprocess.run(["podman", "rmi", "-f", agents, *made], capture_output=True)
