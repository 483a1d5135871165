"""Behaviour specific to the built-in overlay engine: the holder and the lean entry."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from manager.engines.base import RunRequest
from manager.engines.overlay import engine as overlay
from manager.session import store
from manager.session.context import Context
from tests.engines.support import status
from tests.engines.support import wait_until

pytestmark = pytest.mark.engine


@pytest.fixture(autouse=True)
def _on_overlay(overlay_engine: str) -> None:
    """Every test here runs on the built-in overlay engine (the root conftest's fixture)."""


def _session(project: Path) -> store.Session:
    found = store.current(project)
    assert found is not None
    return found


def _entry(project: Path, command: str, cwd: str | None = None, cwd_out: Path | None = None):
    ctx = Context.load(str(project))
    session = _session(project)
    request = RunRequest(command=command, cwd=cwd or str(project), cwd_out=cwd_out)
    return ctx.engine(session).entry_argv(session, request)


def test_lean_entry_runs_in_the_warm_sandbox(ws, project: Path, tmp_path: Path):
    ws("run", "--", "true", check=True)
    out = tmp_path / "cwd"
    argv = _entry(project, "mkdir -p x/y && cd x/y && echo made > f && echo $0 $#", cwd_out=out)
    proc = subprocess.run(argv, capture_output=True, text=True)
    assert (proc.returncode, proc.stdout) == (0, "/bin/bash 0\n")
    assert out.read_text().strip() == str(project / "x/y")
    assert not (project / "x").exists()


def test_lean_entry_restarts_a_dead_holder_and_never_runs_outside(ws, project: Path):
    ws("run", "--", "true", check=True)
    sandbox = _session(project).sandbox
    pid = overlay.holder_pid(sandbox)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    proc = subprocess.run(_entry(project, "echo fresh > after-restart"), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert not (project / "after-restart").exists()
    assert (sandbox / "upperdir" / str(project)[1:] / "after-restart").exists()
    assert overlay.holder_pid(sandbox) not in (None, pid)


def test_a_reused_pid_is_not_mistaken_for_the_holder(ws, project: Path):
    ws("run", "--", "true", check=True)
    sandbox = _session(project).sandbox
    pid_text = (sandbox / overlay.HOLDER_PID).read_text().split()[0]
    (sandbox / overlay.HOLDER_PID).write_text(f"{os.getpid()} 12345\n")
    assert overlay.holder_pid(sandbox) is None
    os.kill(int(pid_text), signal.SIGKILL)
    ws("run", "--", "true", check=True)
    assert overlay.holder_pid(sandbox) is not None


def test_entry_without_fallback_fails_closed(ws, project: Path):
    ws("run", "--", "true", check=True)
    sandbox = _session(project).sandbox
    os.kill(overlay.holder_pid(sandbox), signal.SIGKILL)
    wait_until(lambda: overlay.holder_pid(sandbox) is None)  # SIGKILL lands when it is scheduled
    env = dict(os.environ, WORKSPACE_NO_FALLBACK="1")
    proc = subprocess.run(_entry(project, "touch should-not-exist"), env=env,
                          capture_output=True, text=True, cwd=project)
    assert proc.returncode == 125 and "not running" in proc.stderr
    assert not (project / "should-not-exist").exists()


def test_holder_exits_when_idle(ws, project: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("WORKSPACE_OVERLAY__IDLE_TIMEOUT_HOURS", str(1 / 3600))
    ws("run", "--", "true", check=True)
    sandbox = _session(project).sandbox
    pid = overlay.holder_pid(sandbox)
    deadline = time.monotonic() + 20
    while overlay.holder_pid(sandbox) == pid:
        assert time.monotonic() < deadline, "the idle holder did not exit"
        time.sleep(0.2)


def test_release_stops_the_holder_and_keeps_changes(ws, project: Path):
    ws("run", "--", "sh", "-c", "echo kept > kept.txt", check=True)
    session = _session(project)
    ctx = Context.load(str(project))
    ctx.engine(session).release(session)
    assert overlay.holder_pid(session.sandbox) is None
    assert ws("run", "--", "cat", "kept.txt", check=True).stdout == "kept\n"


def test_sticky_and_private_directories_keep_their_modes(ws):
    out = ws("run", "--", "stat", "-c", "%a", "/tmp", os.path.expanduser("~"), check=True).stdout
    assert out.split() == [oct(os.stat("/tmp").st_mode & 0o7777)[2:],
                           oct(os.stat(os.path.expanduser("~")).st_mode & 0o7777)[2:]]


@pytest.mark.skipif(shutil.which("try") is None, reason="binpash/try is not installed")
def test_try_summary_reads_our_sandbox(ws, project: Path):
    ws("run", "--", "sh", "-c", "echo hi > for-try.txt", check=True)
    proc = subprocess.run(["try", "summary", str(_session(project).sandbox)],
                          capture_output=True, text=True)
    assert f"{project}/for-try.txt (added)" in proc.stdout


def test_outside_changes_to_the_project_are_seen_without_a_fresh_holder(ws, project: Path):
    """overlayfs caches lookups: the next call's sync mounts a fresh overlay of the project's
    layers (a fresh holder took ~0.5 s, after every save Claude Code's Write/Edit make)."""
    (project / "f").write_text("v1\n")
    assert ws("run", "--", "sh", "-c", "cat f; cat g 2>/dev/null; echo mine > made; true",
              check=True).stdout == "v1\n"
    pid = overlay.holder_pid(_session(project).sandbox)
    for round in range(3):   # each change after a refresh is seen too
        (project / "f.tmp").write_text(f"v{round + 2}\n")
        os.replace(project / "f.tmp", project / "f")   # an editor's atomic save
        (project / f"d{round}/e").mkdir(parents=True)   # new directories: watched from now on
        (project / f"d{round}/e/g").write_text("new\n")
        proc = ws("run", "--", "sh", "-c", f"cat f d{round}/e/g made", check=True)
        assert proc.stdout == f"v{round + 2}\nnew\nmine\n"
    (project / "d0/e/g2").write_text("inner\n")      # in a directory made after the start
    (project / "d1/e/g").unlink()
    assert ws("run", "--", "sh", "-c", "cat d0/e/g2; ls d1/e", check=True).stdout == "inner\n"
    assert overlay.holder_pid(_session(project).sandbox) == pid
    assert status(ws) == {str(project / "made"): "added"}


def test_a_path_hidden_after_the_start_needs_a_fresh_holder(ws, project: Path):
    """A ``hide`` pattern that now names a path (a secret saved into the project): only a
    fresh sandbox mounts its mask, so the holder retires rather than show it."""
    (project / ".workspace.yaml").write_text("hide: [.env]\n")
    ws("run", "--", "true", check=True)
    pid = overlay.holder_pid(_session(project).sandbox)
    (project / ".env").write_text("TOKEN=secret\n")
    proc = ws("run", "--", "sh", "-c", "cat .env; true", check=True)
    assert "secret" not in proc.stdout + proc.stderr
    assert overlay.holder_pid(_session(project).sandbox) != pid


def test_a_busy_holder_shows_outside_changes_when_its_calls_end(ws, project: Path):
    """A running command keeps the mount it has (two overlays must not share an upper
    directory at once): calls see the project as it was until it ends, then the change."""
    ws("run", "--", "true", check=True)
    sandbox = _session(project).sandbox
    pid = overlay.holder_pid(sandbox)
    runner = subprocess.Popen(_entry(project, "cat outside 2>/dev/null; touch started; sleep 2"))
    try:
        wait_until(lambda: (sandbox / "upperdir" / str(project)[1:] / "started").exists(), timeout=10)
        (project / "outside").write_text("x")
        time.sleep(0.3)
        ws("run", "--", "true", check=True)   # served meanwhile (the project as it was)
        assert runner.wait(timeout=30) == 0
    finally:
        runner.kill()
    assert ws("run", "--", "cat", "outside", check=True).stdout == "x"
    assert overlay.holder_pid(sandbox) == pid
