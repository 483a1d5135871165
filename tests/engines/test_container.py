"""What only the podman and docker engines do: containers, images, limits, bad conditions."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from manager import config
from manager.engines import registry
from manager.engines.base import RunRequest
from manager.session import store
from tests.engines.support import status
from tests.engines.support import wait_until

pytestmark = [pytest.mark.engine,
              pytest.mark.parametrize("engine_name", ["docker", "podman"], indirect=True)]


def containers(cli: str, session_id: str, running_only: bool = False) -> list[str]:
    argv = [cli, "ps", "-q", "--filter", f"label=org.workspace.session={session_id}"]
    argv += [] if running_only else ["-a"]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()


def current(project: Path) -> store.Session:
    session = store.current(project)
    assert session is not None
    return session


def engine_for(name: str):
    return registry.get(name)(config.load(None))


def test_one_container_per_session_reused(ws, project: Path, engine_name: str):
    ws("run", "--", "true", check=True)
    session = current(project)
    first = containers(engine_name, session.id)
    ws("run", "--", "true", check=True)
    assert containers(engine_name, session.id) == first and len(first) == 1


def test_parallel_first_calls_make_one_container(ws, project: Path, engine_name: str):
    ws("run", "--", "true", check=True)
    session = current(project)
    engine_for(engine_name).release(session)
    procs = [subprocess.Popen([sys.executable, "-m", "manager", "run", "--", "true"], cwd=project)
             for _ in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 4
    assert len(containers(engine_name, session.id)) == 1


def test_changes_survive_container_removal(ws, project: Path, engine_name: str):
    ws("run", "--", "sh", "-c", "echo kept > kept.txt; rm README.txt", check=True)
    before = status(ws)
    session = current(project)
    engine_for(engine_name).release(session)
    assert containers(engine_name, session.id) == []
    assert status(ws) == before
    # A new container sees them: same upper directory.
    out = ws("run", "--", "sh", "-c", "cat kept.txt; ls", check=True).stdout
    assert out == "kept\nkept.txt\n"
    assert before == {str(project / "kept.txt"): "added", str(project / "README.txt"): "deleted"}


def test_gc_removes_the_container_and_keeps_the_changes(ws, project: Path, engine_name: str,
                                                        monkeypatch: pytest.MonkeyPatch):
    ws("run", "--", "sh", "-c", "echo kept > kept.txt", check=True)
    session = current(project)
    monkeypatch.setenv("WORKSPACE_GC__MAX_AGE_DAYS", "0")
    time.sleep(0.05)
    report = json.loads(ws("gc", "--json", check=True).stdout)
    assert report["kept"] == [{"id": session.id, "pending": 1}]
    assert report["containers"] == [{"engine": engine_name, "name": f"workspace-{session.id}",
                                     "session": session.id, "reason": "session stale"}]
    assert containers(engine_name, session.id) == []
    assert status(ws) == {str(project / "kept.txt"): "added"}


def test_gc_sweeps_the_container_of_a_deleted_session(ws, project: Path, engine_name: str):
    ws("run", "--", "true", check=True)
    session = current(project)
    store.remove(session)   # the record goes; its container is left behind
    expected = {"engine": engine_name, "name": f"workspace-{session.id}",
                "session": session.id, "reason": "session gone"}
    dry = json.loads(ws("gc", "--json", "--dry-run", check=True).stdout)
    assert dry["containers"] == [expected] and containers(engine_name, session.id)
    out = ws("gc", check=True).stdout
    assert f"removed container workspace-{session.id} ({engine_name}, session gone" in out
    assert containers(engine_name, session.id) == []


def test_gc_leaves_live_sessions_and_other_state_dirs_alone(ws, project: Path, tmp_path: Path,
                                                            engine_name: str):
    ws("run", "--", "true", check=True)
    session = current(project)
    # A container another state directory (another user, another test run) made.
    foreign = subprocess.run(
        [engine_name, "run", "-d", "--network", "none",
         "--label", "org.workspace.session=ws-elsewhere",
         "--label", f"org.workspace.state={tmp_path / 'other-state'}",
         config.load(None)["container.image"]],
        capture_output=True, text=True, check=True).stdout.strip()
    try:
        report = json.loads(ws("gc", "--json", check=True).stdout)
        assert report["containers"] == []
        assert len(containers(engine_name, session.id, running_only=True)) == 1
        assert subprocess.run([engine_name, "inspect", foreign], capture_output=True).returncode == 0
    finally:
        subprocess.run([engine_name, "rm", "-f", foreign], capture_output=True)


def test_missing_image_names_the_fix(ws, engine_name: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("WORKSPACE_CONTAINER__IMAGE", f"workspace-missing-{uuid.uuid4().hex[:6]}")
    proc = ws("run", "--", "true")
    assert proc.returncode == 1
    assert "workspace image build" in proc.stderr


def test_network_is_off_by_default(ws, engine_name: str):
    out = ws("run", "--", "ls", "/sys/class/net", check=True).stdout
    assert out.split() == ["lo"]


def test_limits_are_applied(ws, project: Path, engine_name: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("WORKSPACE_CONTAINER__PIDS", "64")
    monkeypatch.setenv("WORKSPACE_CONTAINER__MEMORY", "256m")
    ws("run", "--", "true", check=True)
    (ctr,) = containers(engine_name, current(project).id)
    fmt = "{{.HostConfig.PidsLimit}} {{.HostConfig.Memory}}"
    out = subprocess.run([engine_name, "inspect", "-f", fmt, ctr], capture_output=True,
                         text=True, check=True).stdout
    assert out.split() == ["64", str(256 * 1024 * 1024)]


def test_environment_subset(ws, project: Path, engine_name: str):
    env = dict(os.environ, WS_PLAIN="plain", MY_API_TOKEN="secret", LD_PRELOAD="",
               PATH="/nonexistent/bin:" + os.environ["PATH"])
    script = 'printf "%s|%s|%s" "$WS_PLAIN" "${MY_API_TOKEN-unset}" "$PATH"'
    proc = subprocess.run([sys.executable, "-m", "manager", "run", "-c", script], env=env,
                          cwd=project, capture_output=True, text=True, check=True)
    plain, token, path = proc.stdout.split("|")
    assert (plain, token) == ("plain", "unset")
    assert "/nonexistent" not in path


def test_files_belong_to_the_caller(ws, project: Path, engine_name: str):
    ws("run", "--", "sh", "-c", "mkdir d && echo x > d/f", check=True)
    upper = current(project).sandbox / "upper"
    assert (upper / "d/f").stat().st_uid == os.getuid()


def _descendants(pid: int) -> list[psutil.Process]:
    with contextlib.suppress(psutil.NoSuchProcess):
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    return []


def test_lean_entry_survives_a_client_style_tree_kill(ws, project: Path, tmp_path: Path,
                                                      engine_name: str):
    """TERM to the entry and every descendant at once (as Claude Code does): all gone."""
    ws("run", "--", "true", check=True)
    session = current(project)
    marker = f"ws-{uuid.uuid4().hex}"
    script = f"python3 -c 'import time; time.sleep(300)' {marker} & touch ready; wait"
    argv = engine_for(engine_name).entry_argv(session, RunRequest(script, str(project)))
    proc = subprocess.Popen(argv, cwd=project, start_new_session=True)
    wait_until(lambda: (session.sandbox / "upper/ready").exists())
    for p in _descendants(proc.pid):
        with contextlib.suppress(psutil.NoSuchProcess):
            p.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=1.5) == 128 + signal.SIGTERM
    wait_until(lambda: not _marker_procs(marker), timeout=5)


def _marker_procs(marker: str) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["cmdline"])
            if any(marker in part for part in p.info["cmdline"] or [])]


def test_lean_entry_without_container_falls_back_to_the_cli(ws, project: Path, tmp_path: Path,
                                                           engine_name: str):
    ws("run", "--", "true", check=True)
    session = current(project)
    engine_for(engine_name).release(session)
    cwd_out = tmp_path / "cwd"
    argv = engine_for(engine_name).entry_argv(
        session, RunRequest("mkdir -p sub && cd sub && echo in", str(project), cwd_out=cwd_out))
    proc = subprocess.run(argv, cwd=project, capture_output=True, text=True)
    assert (proc.returncode, proc.stdout) == (0, "in\n"), proc.stderr
    assert cwd_out.read_text().strip() == str(project / "sub")


@pytest.fixture
def small_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    if os.getuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], check=True)
    monkeypatch.setenv("XDG_STATE_HOME", str(mnt))
    yield mnt
    for session in store.list_sessions()[0]:
        with contextlib.suppress(Exception):
            engine_for(session.engine).release(session)
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_disk_full_in_the_upper_dir(ws, project: Path, engine_name: str, small_state: Path):
    ws("run", "--", "sh", "-c", "echo early > early.txt", check=True)
    proc = ws("run", "--", "sh", "-c", "head -c 20000000 /dev/zero > big.bin")
    assert proc.returncode != 0
    assert "No space left on device" in proc.stderr
    ws("run", "--", "rm", "-f", "big.bin", check=True)
    assert status(ws) == {str(project / "early.txt"): "added"}
    assert ws("run", "--", "cat", "early.txt", check=True).stdout == "early\n"
