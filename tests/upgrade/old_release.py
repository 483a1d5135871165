"""The release before state formats (commit 73837e2), run from this very repository.

Fixture state is made at test time by that release's own code, extracted with
``git archive`` (see README.md here): no binary trees in the repository, and
whiteouts, xattrs and owners come out as the old engines really make them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
OLD = "73837e2"   # the last release: its records carry no format
# Reading this repository as another user (tests run as an ordinary account too).
GIT = ["git", "-c", "safe.directory=*", "-C", str(REPO)]


def extract(dest: Path) -> Path:
    """The old release's source tree under ``dest`` (CI runs in a full clone)."""
    if subprocess.run([*GIT, "cat-file", "-e", f"{OLD}^{{commit}}"],
                      capture_output=True).returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"commit {OLD} is missing: CI must check out the full history")
        pytest.skip(f"commit {OLD} is not in this clone (shallow?)")
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run([*GIT, "archive", OLD, "manager", "bin", "hooks"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def env_for(code: Path, **extra: str) -> dict[str, str]:
    """The environment with ``code`` as the ``manager`` package (and nothing else's)."""
    env = dict(os.environ, PYTHONPATH=str(code), **extra)
    return env


def cli(code: Path, *args: str, cwd: Path, check: bool = True, timeout: float = 180,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``workspace ARGS`` as release ``code`` runs it."""
    proc = subprocess.run([sys.executable, "-m", "manager", *args], cwd=cwd,
                          env=env or env_for(code), capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"[{code}] workspace {' '.join(args)} exited {proc.returncode}:\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def changes(code: Path, cwd: Path, *args: str,
            env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """``status --json`` changes, sorted by path."""
    out = cli(code, "status", "--json", *args, cwd=cwd, env=env).stdout
    return sorted(json.loads(out)["changes"], key=lambda c: c["path"])


# A SIGKILL after this many published steps: the old release dies mid-commit.
KILLER = """
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from manager import steps
publish = steps.Executor._publish
left = [int(sys.argv[2])]
def killing(self, item):
    if left[0] == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    left[0] -= 1
    publish(self, item)
steps.Executor._publish = killing
from manager.main import main
sys.exit(main(sys.argv[3:]))
"""


def commit_killed(code: Path, after: int, cwd: Path, *args: str,
                  env: dict[str, str] | None = None) -> None:
    """The old release's ``workspace commit``, SIGKILLed after ``after`` published steps."""
    proc = subprocess.run([sys.executable, "-c", KILLER, str(code), str(after), "commit", *args],
                          cwd=cwd, env=env or env_for(code), capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == -9, (proc.returncode, proc.stdout, proc.stderr)
