"""Run the real CLI as a given account: the one pytest runs as, or an ordinary user.

Users are not root. When pytest runs as root, the "ordinary" account is the test
user (``wstest``, made by the setup; ``WORKSPACE_TEST_USER`` names another) and
every call goes through ``runuser``; its state lives in a tmp dir it owns. When
pytest already runs as an ordinary user, that user is the one tested.
"""

from __future__ import annotations

import functools
import os
import pwd
import shutil
import site
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import pytest

from tests.holders import stop_holders

REPO = Path(__file__).resolve().parents[2]
ORDINARY = os.environ.get("WORKSPACE_TEST_USER", "wstest")
# Run as an ordinary user, pytest's own account is the ordinary one: no second case.
KINDS = ["self", "ordinary"] if os.geteuid() == 0 else ["self"]


@dataclass
class Account:
    """One account's view: its own HOME, state and project, and the CLI run as it."""

    name: str
    uid: int
    gid: int
    base: Path
    prefix: list[str] = field(default_factory=list)  # runuser, when it is not us
    python: str = sys.executable

    @property
    def project(self) -> Path:
        return self.base / "proj"

    @property
    def state(self) -> Path:
        return self.base / "state"

    def env(self, **extra: str) -> dict[str, str]:
        pythonpath = [str(REPO), *_site_dirs(), *filter(None, [os.environ.get("PYTHONPATH")])]
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "HOME": str(self.base / "home"),
            "USER": self.name,
            "XDG_STATE_HOME": str(self.state),
            "XDG_CONFIG_HOME": str(self.base / "config"),
            "WORKSPACE_FORBID_DEFAULT_STATE": "1",
            "WORKSPACE_ENGINE": "overlay",
            "NO_COLOR": "1",
            "PYTHONPATH": os.pathsep.join(pythonpath),
        }
        env.update(extra)
        return env

    def run(self, argv: list[str], *, cwd: Path | None = None, input: str | None = None,
            env: dict[str, str] | None = None, outer: list[str] | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """``argv`` as this account, in its environment (``env`` adds to it); ``outer`` runs
        first as pytest's own user (e.g. ``unshare --mount``) and execs the rest."""
        full = self.env(**(env or {}))
        command = [*(outer or []), *self.prefix, "env", *(f"{k}={v}" for k, v in full.items()), *argv]
        return subprocess.run(command, cwd=cwd or self.project, input=input, env=full,
                              capture_output=True, text=True, timeout=timeout)

    def popen(self, argv: list[str], **kwargs: object) -> subprocess.Popen[str]:
        full = self.env()
        command = [*self.prefix, "env", *(f"{k}={v}" for k, v in full.items()), *argv]
        return subprocess.Popen(command, cwd=self.project, env=full, text=True,  # type: ignore[call-overload]
                                **kwargs)

    def ws(self, *args: str, check: bool = False, **kwargs: object) -> subprocess.CompletedProcess[str]:
        proc = self.run([self.python, "-m", "manager", *args], **kwargs)  # type: ignore[arg-type]
        if check and proc.returncode != 0:
            raise AssertionError(f"[{self.name}] workspace {' '.join(args)} exited {proc.returncode}:\n"
                                 f"{proc.stdout}\n{proc.stderr}")
        return proc

    def sandbox(self) -> Path:
        found = sorted(self.state.glob("workspace/sessions/*/sandbox"))
        assert len(found) == 1, found
        return found[0]

    def chown(self, *paths: Path) -> None:
        if self.prefix:
            for path in paths:
                os.chown(path, self.uid, self.gid)


@functools.cache
def _site_dirs() -> tuple[str, ...]:
    """This interpreter's packages, for an account that runs another interpreter."""
    return tuple(p for p in site.getsitepackages() if os.path.isdir(p))


@functools.cache
def _python_for(user: str) -> str:
    """This interpreter when the user may run it, else the system's python3."""
    probe = subprocess.run(["runuser", "-u", user, "--", sys.executable, "-c", "pass"],
                           capture_output=True)
    return sys.executable if probe.returncode == 0 else (shutil.which("python3", path="/usr/bin:/bin")
                                                         or "python3")


def make(kind: str, tmp_path: Path) -> Account:
    """The account for ``kind`` ("self" or "ordinary"), with home/state/config/proj made."""
    if kind == "self":
        entry = pwd.getpwuid(os.geteuid())
        account = Account(entry.pw_name, entry.pw_uid, entry.pw_gid, tmp_path / "account")
        account.base.mkdir()
    else:
        try:
            entry = pwd.getpwnam(ORDINARY)
        except KeyError:
            if os.environ.get("CI"):
                pytest.fail(f"the ordinary test user {ORDINARY!r} must exist in CI (setup makes it)")
            pytest.skip(f"no user {ORDINARY!r} here to test as (setup makes it)")
        # Not under pytest's tmp dir: /tmp/pytest-of-root is 0700.
        base = Path(tempfile.mkdtemp(prefix="ws-test-user-", dir="/tmp"))
        account = Account(entry.pw_name, entry.pw_uid, entry.pw_gid, base,
                          prefix=["runuser", "-u", entry.pw_name, "--"],
                          python=_python_for(entry.pw_name))
    for sub in ("home", "state", "config", "proj"):
        (account.base / sub).mkdir()
    (account.project / "README.txt").write_text("hello\n")
    account.chown(account.base, *(account.base / s for s in ("home", "state", "config", "proj")),
                  account.project / "README.txt")
    return account


def clean(account: Account) -> None:
    """Stop the account's holders; remove its tmp dir when it is not pytest's own."""
    stop_holders(account.base)
    if account.prefix:
        shutil.rmtree(account.base, ignore_errors=True)

