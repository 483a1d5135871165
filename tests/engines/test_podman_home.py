"""podman's own storage below a directory the sandbox overlays ($HOME, by podman's default).

Rootless podman keeps its containers' files in ~/.local/share/containers/storage and mounts
each container's files there as it starts; the kernel refuses, in a user namespace, an
overlay whose lower directory has mounts below it. Before this was handled every call of a
default rootless setup failed with podman's `invalid argument`.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from manager.engines import container_view
from manager.engines.container import rootless_podman
from tests.engines.support import status


def test_a_directory_holding_the_engines_storage_is_not_overlaid_in_a_user_namespace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    # The rule alone: no other mount below anything here (other tests may mount in /tmp).
    monkeypatch.setattr(container_view, "_mountinfo_texts", lambda: [""])
    project = tmp_path / "proj"
    project.mkdir(exist_ok=True)
    plain = container_view.wanted(str(project), in_userns=True)
    storage = (str(Path.home() / ".local/share/containers/storage"), "/run/user/1/containers")
    holder = next(p for p in plain if container_view._within(storage[0], p))   # $HOME, or /tmp
    kept = container_view.wanted(str(project), in_userns=True, storage=storage)
    assert kept == [p for p in plain if p != holder]
    assert f"{holder} is not overlaid in this container: podman keeps its containers' files " \
           f"below it ({storage[0]})" in capsys.readouterr().err
    # Elsewhere than in a user namespace (docker, rootful podman) it is overlaid.
    assert holder in container_view.wanted(str(project), in_userns=False, storage=storage)


@pytest.mark.engine
@pytest.mark.parametrize("engine_name", ["podman"], indirect=True)
def test_calls_work_with_podmans_storage_in_home(ws, project: Path, engine_name: str,
                                                  monkeypatch: pytest.MonkeyPatch):
    """$HOME is a real directory holding the storage podman uses (only read: writes land in
    the session's upper directory)."""
    home = _graph_root().parents[1]   # ~/.local/share by default: above containers/storage
    monkeypatch.setenv("HOME", str(home))
    proc = ws("run", "--", "sh", "-c", "echo hi > made.txt && test -d ~ && cat made.txt")
    assert (proc.returncode, proc.stdout) == (0, "hi\n"), proc.stderr
    assert status(ws) == {str(project / "made.txt"): "added"}
    # Rootless, with a note: because of the storage, or of a container of this user's
    # running meanwhile (its files are mounted below $HOME then).
    noted = f"workspace: {home} is not overlaid in this container: "
    assert (noted in proc.stderr) == rootless_podman(), proc.stderr


@pytest.mark.engine
@pytest.mark.parametrize("engine_name", ["podman"], indirect=True)
def test_a_project_holding_podmans_storage_is_refused_plainly(ws, engine_name: str):
    """A session started in $HOME (its project then holds podman's storage): under rootless
    podman, an error that says why and what to do, not podman's `invalid argument`."""
    holder = _graph_root().parents[1]
    proc = ws("run", "--", "true", cwd=holder)
    if rootless_podman():
        assert proc.returncode == 125, proc.stderr   # the sandbox failed: the command did not run
        assert f"{holder} holds podman's own storage" in proc.stderr
        assert "hint: start the session in a project directory below it" in proc.stderr
        assert "invalid argument" not in proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr   # rootful podman mounts it as root: no limit
    ws("discard", "--yes", cwd=holder)


def _graph_root() -> Path:
    return Path(subprocess.run(["podman", "info", "--format", "{{.Store.GraphRoot}}"],
                               capture_output=True, text=True, check=True).stdout.strip())


@pytest.mark.engine
@pytest.mark.parametrize("engine_name", ["podman-volume", "docker-volume"], indirect=True)
def test_home_is_the_callers_when_the_project_is_in_it_and_it_is_not_overlaid(
        ws, engine_name: str, monkeypatch: pytest.MonkeyPatch):
    """Volume mode (and rootless podman's default) leaves $HOME to the container: with the
    project below it, the runtime made it as root's, and tools could not write their caches
    (pip, npm: `Permission denied`)."""
    project = Path(os.environ["HOME"]) / "proj"
    project.mkdir()
    proc = ws("run", "--", "sh", "-c", "echo kept > ~/.tool-cache && cat ~/.tool-cache && "
              "stat -c %u ~", cwd=project)
    assert (proc.returncode, proc.stdout) == (0, f"kept\n{os.getuid()}\n"), proc.stderr
