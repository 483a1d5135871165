"""Every test runs against temporary state: no real ~/.claude, no real $XDG_STATE_HOME.

The autouse fixture points HOME and the XDG directories into the test's tmp
dir and sets WORKSPACE_FORBID_DEFAULT_STATE, so code that forgets to honour
them raises instead of writing into the real home directory; after the test it
checks that nothing appeared in the real state directory.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.overlay_model import Tree

REAL_HOME = Path(os.path.expanduser("~"))
REAL_STATE = Path(os.environ.get("XDG_STATE_HOME") or REAL_HOME / ".local/state") / "workspace"
REAL_CLAUDE = REAL_HOME / ".claude"


def _snapshot() -> tuple[bool, bool]:
    return REAL_STATE.exists(), REAL_CLAUDE.exists()


@pytest.fixture(autouse=True)
def isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    before = _snapshot()
    home = tmp_path / "home"
    home.mkdir()
    for name in list(os.environ):
        if name.startswith(("WORKSPACE_", "CLAUDE_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("WORKSPACE_FORBID_DEFAULT_STATE", "1")
    monkeypatch.setenv("NO_COLOR", "1")
    yield home
    _stop_holders(tmp_path)
    _removable_work_dirs(tmp_path)
    assert _snapshot() == before, "a test wrote into the real ~/.local/state/workspace or ~/.claude"


def _removable_work_dirs(tmp_path: Path) -> None:
    """overlayfs leaves its work dirs mode 0000: an ordinary user's pytest could not remove
    old tmp dirs holding them."""
    for state in ("state", "account/state"):
        for work in tmp_path.glob(f"{state}/workspace/sessions/*/sandbox/workdir/*/work"):
            with contextlib.suppress(OSError):
                work.chmod(0o700)


def _stop_holders(tmp_path: Path) -> None:
    """Namespace holders outlive the CLI by design; a test's end is their end."""
    import signal

    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(part.endswith(b"overlay_holder.py") for part in cmdline) and \
                any(part.startswith(str(tmp_path).encode()) for part in cmdline):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "README.txt").write_text("hello\n")
    return root


Runner = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def ws(project: Path) -> Runner:
    """Run the real ``workspace`` CLI (a fresh interpreter) in the project."""

    def run(*args: str, cwd: Path | None = None, input: str | None = None,
            check: bool = False, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([sys.executable, "-m", "manager", *args], cwd=cwd or project,
                              input=input, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"workspace {' '.join(args)} exited {proc.returncode}:\n"
                                 f"{proc.stdout}\n{proc.stderr}")
        return proc

    return run


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    """A real directory with an upper layer built by hand (see overlay_model)."""
    return Tree.make(tmp_path / "t")
