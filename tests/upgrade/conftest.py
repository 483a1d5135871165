"""Fixtures of the upgrade tests: the old release's code, engines, a git project."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engines.conftest import CONTAINER_ENGINES
from tests.engines.conftest import _remove_containers
from tests.engines.conftest import _unavailable
from tests.upgrade import old_release


@pytest.fixture(scope="session")
def old_code(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The release before state formats, extracted once per test run."""
    return old_release.extract(tmp_path_factory.mktemp("old-release"))


@pytest.fixture
def git_project(project: Path) -> Path:
    """A git project with files to modify, delete and replace."""
    (project / "mod.txt").write_text("line 1\n")
    (project / "del.txt").write_text("to delete\n")
    (project / "opq").mkdir()
    for name in ("a", "b"):
        (project / "opq" / name).write_text(f"old {name}\n")
    for argv in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t",
                                                  "commit", "-qm", "base"]):
        subprocess.run(["git", *argv], cwd=project, check=True, capture_output=True)
    return project


@pytest.fixture(params=["overlay", "try", "podman", "docker"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Each engine the old release had; in CI a missing one fails (try only when absent)."""
    name: str = request.param
    reason = _unavailable(name)
    if reason:
        if os.environ.get("CI") and name != "try":
            pytest.fail(f"engine {name} must run in CI: {reason}")
        pytest.skip(f"engine {name} unavailable here: {reason}")
    monkeypatch.setenv("WORKSPACE_ENGINE", name)
    if name in CONTAINER_ENGINES:
        monkeypatch.setenv("WORKSPACE_CONTAINER__UPPER", "host")
    yield name
    if name in CONTAINER_ENGINES:
        _remove_containers(name)
