"""Issue 20, "No handle to the host from inside": a sandboxed command holds no descriptor
but 0-2 (an inherited directory is a way out: fchdir, then `..` up to the real root; a
writable host file is one too), no process it can see has another root, and a command
that is root in the namespace cannot chroot its way out (the sandbox's root is pivoted
into, the host's root detached, not chrooted over).

Run as root (the namespace maps every id; the command is root), and as the ordinary user
with its subordinate ids (the command is the user, no capabilities) and without (a single
mapping: the command is the namespace's root with every capability in it).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from manager.engines.overlay import engine as overlay
from tests.engines import conftest as engines_conftest
from tests.engines import tryforms
from tests.engines.accounts import Account
from tests.engines.conftest import _remove_containers
from tests.engines.conftest import _use
from tests.engines.test_overlay_user import _path_without

pytestmark = pytest.mark.engine

PROBE = (Path(__file__).parent / "host_probe.py").read_text()
# The system's: a PATH entry of pytest's user (e.g. under /root) may be out of the user's reach.
PYTHON = shutil.which("python3", path="/usr/bin:/bin") or "python3"
LAYOUTS = ["own", "single"]   # the account's own id layout; forced single (no newuidmap)


account = engines_conftest.account   # the fixture: root, wstest with subordinate ids, ...


def _target(account: Account) -> Path:
    target = account.base / "escapes"
    target.mkdir()
    account.chown(target)
    return target


def _env(account: Account, layout: str) -> dict[str, str]:
    return {"PATH": _path_without(account, "newuidmap", "newgidmap")} if layout == "single" else {}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_no_way_out_of_the_overlay_sandbox(account: Account, layout: str):
    """Inherited descriptors, other processes' roots, descriptors and mount namespaces, and the
    chroot walk: none reaches the real filesystem. Run with a cwd report (the hook's path)."""
    target = _target(account)
    report = account.base / "cwd"
    proc = account.run([account.python, "-m", "manager", "run", "--cwd-out", str(report), "--",
                        PYTHON, "-I", "-S", "-c", PROBE, str(target)], env=_env(account, layout))
    assert proc.returncode == 0, proc.stderr
    escaped = sorted(p.name for p in target.iterdir())
    assert escaped == [], f"reached the host by {escaped}; the probe saw:\n{proc.stdout}"
    assert "inherited fd" not in proc.stdout, proc.stdout
    assert report.read_text().strip() == str(account.project)   # the report still works


@pytest.mark.parametrize("report", [True, False], ids=["report", "background"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_command_and_its_shell_hold_no_descriptor_beyond_stdio(account: Account, layout: str,
                                                                   report: bool):
    """A program the command runs holds 0-2 only; the command's own shell ($BASHPID) and the
    one that runs it ($$) hold at most the pipe that carries the final directory out (with a
    report; none without, as for a background call): no file, no directory."""
    script = ("ls /proc/self/fd; echo --; for f in /proc/$BASHPID/fd/* /proc/$$/fd/*; do "
              "n=${f##*/}; ((n > 2)) && readlink $f; done; true")
    args = ["run", *(["--cwd-out", str(account.base / "cwd")] if report else []), "-c", script]
    proc = account.run([account.python, "-m", "manager", *args], env=_env(account, layout))
    assert proc.returncode == 0, proc.stderr
    program, links = proc.stdout.split("--\n")
    assert program.split() == ["0", "1", "2", "3"], program   # 3: ls's own listing
    assert all(link.startswith("pipe:") for link in links.split()), links
    assert report or not links.split(), links


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_lean_entry_passes_on_no_descriptor_of_its_caller(account: Account, layout: str):
    """The plugin's path: the client's shell runs the entry script, with whatever it holds
    open (here a file and a directory, fds 7 and 8); the command gets neither."""
    env = _env(account, layout)
    account.ws("run", "--", "true", env=env, check=True)   # the holder
    sandbox = account.sandbox()
    report = account.base / "cwd"
    entry = ["/bin/bash", str(overlay.ENTER_SCRIPT), str(sandbox), sandbox.parent.name,
             account.python, str(account.project), str(report), "ls /proc/self/fd"]
    holding = ["bash", "-c", 'exec 7<"$0" 8<"$1"; shift; exec "$@"', "/etc/hostname", "/", *entry]
    proc = account.run(holding, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "1", "2", "3"], proc.stdout   # 3: ls's own listing
    assert report.read_text().strip() == str(account.project)


@pytest.fixture(params=["podman", "docker"])
def container_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = _use(request.param, monkeypatch)
    yield name
    _remove_containers(name)


def test_a_container_call_holds_no_descriptor_beyond_stdio(ws, container_engine: str, tmp_path: Path):
    """`docker/podman exec` passes the command its stdio only: nothing of the entry's (its
    watcher pipe, the client's stdin copy) or the caller's."""
    proc = ws("run", "--cwd-out", str(tmp_path / "cwd"), "-c", "ls /proc/self/fd")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "1", "2", "3"], proc.stdout   # 3: ls's own listing


@pytest.fixture(params=list(tryforms.FORMS))
def try_form(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    return _use(request.param, monkeypatch)


def test_under_try_a_program_holds_no_descriptor_beyond_stdio(ws, try_form: str, tmp_path: Path):
    """try is no boundary (see below), but its entry passes the command no descriptor of its
    own, try's or the caller's either; the final directory is still reported."""
    report = tmp_path / "cwd"
    proc = ws("run", "--cwd-out", str(report), "-c", "ls /proc/self/fd; cd /tmp")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "1", "2", "3"], proc.stdout   # 3: ls's own listing
    assert report.read_text().strip() == "/tmp"


def test_doctor_says_try_is_not_a_boundary(ws, project: Path, monkeypatch: pytest.MonkeyPatch):
    """try runs the command as root in a chroot by its own design: doctor says so plainly."""
    proc = ws("doctor", "--engine", "try", "--json")
    checks = json.loads(proc.stdout)["engines"]["try"]
    text = " ".join(str(c.get("detail", "")) + " " + str(c.get("name", "")) for c in checks)
    assert "not a security boundary" in text, proc.stdout


def test_doctor_says_what_the_overlay_boundary_holds_for_this_account(ws):
    """Doctor measures from inside a trial sandbox which host kernel interfaces a command
    reaches (/proc/sys, /sys, device nodes; the attack pass wrote kernel.core_pattern as
    root; attack pass 11 unmounted the call's /proc to reach the host's below): none, as
    root too (tests/security/test_kernel_reach.py)."""
    said = ws("doctor", "--engine", "overlay", check=True).stdout
    assert "ok   security: writes anywhere are held for review" in said, said
    assert "no host kernel interface" in said, said
