"""A plain install (the plugin's own bootstrap, pip without extras) runs the container engines.

The install is real: ``bin/bootstrap`` makes a venv and pip-installs a copy of this checkout
with its dependencies from the package index, as the plugin does on a user's machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.engine, pytest.mark.slow]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The plugin's venv after its bootstrap: DATA/venv/bin/python."""
    tmp = tmp_path_factory.mktemp("install")
    root = tmp / "plugin"
    root.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, root / name)
    for name in ("bin", "manager"):
        shutil.copytree(REPO / name, root / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    data = tmp / "data"
    data.mkdir()
    env = {**os.environ, "WORKSPACE_BOOTSTRAP_PYTHON": sys.executable}
    env.pop("PYTHONPATH", None)   # the venv must run its own copy, not this checkout
    proc = subprocess.run(["bash", str(root / "bin/bootstrap"), str(root), str(data)], env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0 and (data / "venv/.ready").exists(), proc.stdout + proc.stderr
    yield data / "venv/bin/python"


def _clean_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return env


def test_the_install_carries_the_engines_dependencies_and_the_image_definition(installed: Path):
    code = ("import python_on_whales, manager.commands.image as i; "
            "print(sorted(p.name for p in i.IMAGES_DIR.iterdir()), i.IMAGES_DIR)")
    proc = subprocess.run([str(installed), "-I", "-c", code], capture_output=True, text=True,
                          check=True, env=_clean_env())
    names, where = proc.stdout.rsplit(" ", 1)
    assert names == "['Containerfile', 'build.sh', 'ws-exec']"
    assert Path(where.strip()).is_relative_to(installed.parents[1])   # inside the venv
    help_text = subprocess.run([str(installed), "-m", "manager", "image", "build", "--help"],
                               capture_output=True, text=True, check=True, env=_clean_env())
    assert "mmdebstrap" in help_text.stdout


@pytest.mark.parametrize("engine_name", ["docker", "podman"], indirect=True)
def test_the_installed_copy_runs_and_doctor_agrees(installed: Path, project: Path,
                                                   engine_name: str):
    env = {**_clean_env(), "WORKSPACE_ENGINE": engine_name}
    doctor = subprocess.run([str(installed), "-m", "manager", "doctor", "--engine", engine_name],
                            cwd=project, capture_output=True, text=True, env=env, timeout=600)
    assert f"{engine_name}: works" in doctor.stdout, doctor.stdout + doctor.stderr
    proc = subprocess.run([str(installed), "-m", "manager", "run", "--", "sh", "-c",
                           "echo x > x.txt && id -u"], cwd=project, capture_output=True,
                          text=True, env=env, timeout=300)
    assert (proc.returncode, proc.stdout) == (0, f"{os.getuid()}\n"), proc.stderr
