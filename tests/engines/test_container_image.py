"""The image a container session runs: container.image, else the project's trusted
devcontainer (JSONC; ``image`` or ``build``, built once under a content-hash tag)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from manager import config
from manager.engines import registry
from manager.engines.container import image as container_image
from manager.session import store

DEVCONTAINER = """// the project's dev container
{
  /* built from the sandbox image */
  "name": "demo, with a comma // and slashes",
  "build": {
    "dockerfile": "Dockerfile",   // relative to this file
    "context": "..",
    "args": {"MARK": "%s",},
  },
}
"""
DOCKERFILE = "FROM workspace-sandbox:latest\nARG MARK\nRUN echo \"$MARK\" > /etc/ws-marker\n"


def _write(project: Path, mark: str) -> Path:
    (project / ".devcontainer").mkdir(exist_ok=True)
    (project / ".devcontainer/Dockerfile").write_text(DOCKERFILE)
    path = project / ".devcontainer/devcontainer.json"
    path.write_text(DEVCONTAINER % mark)
    return path


def test_jsonc_comments_strings_and_trailing_commas():
    text = '{"a": "http://x/*y*/", // c\n "b": [1, 2,], /* d */ "c": {"e": "\\"//",},}'
    assert json.loads(container_image.strip_jsonc(text)) == {
        "a": "http://x/*y*/", "b": [1, 2], "c": {"e": '"//'}}


def test_devcontainer_build_is_read_relative_to_its_file(project: Path):
    spec = container_image.load(_write(project, "m1"))
    assert spec.dockerfile == project / ".devcontainer/Dockerfile"
    assert spec.context == project and spec.args == (("MARK", "m1"),)
    assert spec.tag() == container_image.load(spec.path).tag()       # deterministic
    assert spec.tag() != container_image.load(_write(project, "m2")).tag()
    (project / ".devcontainer/devcontainer.json").write_text('{"image": "debian:12",}')
    assert container_image.load(project / ".devcontainer/devcontainer.json").tag() == "debian:12"


def test_devcontainer_is_used_only_while_trusted(ws, project: Path, capsys):
    path = _write(project, "m1")
    default = config.SCHEMA["container.image"].default
    assert container_image.choose(config.load(project), project) == (default, None)
    assert "is not trusted" in capsys.readouterr().err
    assert "devcontainer.json is ignored: not trusted" in ws("config", check=True).stdout
    shown = ws("config", "trust", check=True).stdout
    assert "FROM workspace-sandbox" in shown and f"trusted {path}" in shown
    assert json.loads(ws("config", "--json", check=True).stdout)["container.image"][
        "devcontainer"] == {"path": str(path), "trusted": True}
    image, spec = container_image.choose(config.load(project), project)
    assert spec is not None and image == spec.tag() and image.startswith("workspace-devcontainer:")
    # The agent can write the project: a changed Dockerfile (or file) is untrusted again.
    (project / ".devcontainer/Dockerfile").write_text(DOCKERFILE + "RUN true\n")
    assert container_image.choose(config.load(project), project) == (default, None)
    ws("config", "trust", check=True)
    path.write_text(path.read_text() + "\n// more\n")
    assert container_image.choose(config.load(project), project) == (default, None)


def test_an_explicit_image_wins_over_the_devcontainer(project: Path,
                                                      monkeypatch: pytest.MonkeyPatch):
    _write(project, "m1")
    monkeypatch.setenv("WORKSPACE_CONTAINER__IMAGE", "mine:1")
    assert container_image.choose(config.load(project), project) == ("mine:1", None)


def test_container_image_is_trust_gated_in_the_project_file(project: Path):
    """An image is code the agent would choose: a project file sets it only once trusted."""
    assert "container.image" in config.TRUST_REQUIRED
    (project / config.PROJECT_FILE).write_text("container:\n  image: evil:1\n")
    cfg = config.load(project)
    assert cfg["container.image"] == config.SCHEMA["container.image"].default
    assert "container.image" in cfg.ignored


@pytest.fixture
def built(engine_name: str) -> Iterator[list[str]]:
    """Images a test builds, removed after it."""
    tags: list[str] = []
    yield tags
    for tag in tags:
        subprocess.run([engine_name, "rmi", "-f", tag], capture_output=True)


@pytest.mark.engine
@pytest.mark.as_user
@pytest.mark.parametrize("engine_name", ["docker", "podman"], indirect=True)
def test_a_trusted_devcontainer_is_built_once_and_runs_the_calls(
        ws, project: Path, engine_name: str, built: list[str]):
    mark = f"mark-{os.getpid()}-{engine_name}"
    _write(project, mark)
    ws("config", "trust", check=True)
    image, _ = container_image.choose(config.load(project), project)
    built.append(image)
    first = ws("run", "--", "cat", "/etc/ws-marker", check=True)
    assert first.stdout == f"{mark}\n" and "building" in first.stderr
    session = store.current(project)
    assert session is not None
    registry.make(engine_name, config.load(project)).release(session)
    again = ws("run", "--", "cat", "/etc/ws-marker", check=True)
    assert again.stdout == f"{mark}\n" and "building" not in again.stderr

    # A sandboxed rewrite is the sandbox's view only: the real file decides.
    ws("run", "-c", "echo '{\"image\": \"evil:1\"}' > .devcontainer/devcontainer.json", check=True)
    registry.make(engine_name, config.load(project)).release(session)
    assert ws("run", "--", "cat", "/etc/ws-marker", check=True).stdout == f"{mark}\n"
    # The agent's Write tool changes the real file: ignored (untrusted) until the user trusts.
    ws("discard", "--yes", check=True)
    real = project / ".devcontainer/devcontainer.json"
    real.write_text(real.read_text().replace(mark, "other"))
    registry.make(engine_name, config.load(project)).release(session)
    proc = ws("run", "--", "sh", "-c", "cat /etc/ws-marker 2>/dev/null || echo default")
    assert proc.stdout == "default\n" and "is not trusted" in proc.stderr


@pytest.mark.engine
@pytest.mark.as_user
@pytest.mark.parametrize("engine_name", ["docker", "podman"], indirect=True)
def test_container_image_setting_chooses_the_image(ws, project: Path, tmp_path: Path,
                                                   engine_name: str, built: list[str],
                                                   monkeypatch: pytest.MonkeyPatch):
    context = tmp_path / "img"
    context.mkdir()
    (context / "Dockerfile").write_text(DOCKERFILE)
    tag = f"workspace-test-image:{os.getpid()}"
    built.append(tag)
    subprocess.run([engine_name, "build", "--network", "none", "-t", tag, "--build-arg",
                    "MARK=chosen", str(context)],
                   check=True, capture_output=True, env=dict(os.environ, DOCKER_BUILDKIT="0"))
    _write(project, "devcontainer")   # trusted or not, an explicit image wins
    monkeypatch.setenv("WORKSPACE_CONTAINER__IMAGE", tag)
    out = subprocess.run([sys.executable, "-m", "manager", "run", "--", "cat", "/etc/ws-marker"],
                         cwd=project, capture_output=True, text=True, check=True).stdout
    assert out == "chosen\n"


@pytest.mark.engine
@pytest.mark.needs_root   # an ordinary user's rootless images live in their real HOME
def test_image_build_uses_the_configured_engine(ws, tmp_path: Path):
    """A podman user's build goes to podman alone: docker's socket is not theirs to use."""
    (tmp_path / "config/workspace").mkdir(parents=True)
    (tmp_path / "config/workspace/config.yaml").write_text("engine: podman\n")
    proc = ws("image", "build", check=True, timeout=600)
    said = proc.stdout + proc.stderr
    assert "podman:" in said and "docker:" not in said, said


def test_image_build_says_its_default_in_help(ws):
    help_text = " ".join(ws("image", "build", "--help", check=True).stdout.split())
    assert "--engine" in help_text and "the configured engine" in help_text
