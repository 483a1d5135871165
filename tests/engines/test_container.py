"""What only the podman and docker engines do: containers, images, limits, bad conditions."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from manager import config
from manager.engines import registry
from manager.engines.base import RunRequest
from manager.engines.container.base import resource_name
from manager.engines.container.engine import rootless_podman
from manager.session import paths
from manager.session import store
from tests.engines.support import status
from tests.engines.support import wait_until

pytestmark = [pytest.mark.engine,
              pytest.mark.parametrize("engine_name", ["docker", "podman"], indirect=True)]


def containers(cli: str, session_id: str, running_only: bool = False) -> list[str]:
    argv = [cli, "ps", "-q", "--filter", f"label=org.workspace.session={session_id}",
            "--filter", f"label=org.workspace.state={paths.state_home()}"]
    argv += [] if running_only else ["-a"]
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()


def current(project: Path) -> store.Session:
    session = store.current(project)
    assert session is not None
    return session


def engine_for(name: str):
    return registry.make(name, config.load(None))


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
    assert report["containers"] == [{"engine": engine_name, "name": resource_name(session.id),
                                     "session": session.id, "reason": "session stale"}]
    assert containers(engine_name, session.id) == []
    assert status(ws) == {str(project / "kept.txt"): "added"}


def test_gc_sweeps_the_container_of_a_deleted_session(ws, project: Path, tmp_path: Path,
                                                      engine_name: str):
    ws("run", "--", "true", check=True)
    session = current(project)
    # The record goes; its container is left behind. (Moved, not deleted: the overlay's work
    # dir is the engine's until the container is gone, see ContainerEngine.clear_work.)
    gone = tmp_path / "gone"
    session.dir.rename(gone)
    expected = {"engine": engine_name, "name": resource_name(session.id),
                "session": session.id, "reason": "session gone"}
    dry = json.loads(ws("gc", "--json", "--dry-run", check=True).stdout)
    assert dry["containers"] == [expected] and containers(engine_name, session.id)
    out = ws("gc", check=True).stdout
    assert f"removed container {resource_name(session.id)} ({engine_name}, session gone" in out
    assert containers(engine_name, session.id) == []
    gone.rename(session.dir)
    engine_for(engine_name).destroy(store.load(session.id))
    assert not session.sandbox.exists()


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
    assert proc.returncode == 125
    assert "workspace image build" in proc.stderr


def test_network_is_off_by_default(ws, engine_name: str):
    out = ws("run", "--", "ls", "/sys/class/net", check=True).stdout
    assert out.split() == ["lo"]


def test_limits_are_applied(ws, project: Path, engine_name: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("WORKSPACE_CONTAINER__PIDS", "64")
    monkeypatch.setenv("WORKSPACE_CONTAINER__MEMORY", "256m")
    if engine_name == "podman" and rootless_podman() and not _cgroup2():
        # Rootless podman takes the limits, says so on stderr, and ignores them: refused.
        proc = ws("run", "--", "true")
        assert proc.returncode == 125, proc.stderr
        assert "does not apply container.memory, container.pids" in proc.stderr
        assert containers(engine_name, current(project).id) == []
        return
    ws("run", "--", "true", check=True)
    (ctr,) = containers(engine_name, current(project).id)
    fmt = "{{.HostConfig.PidsLimit}} {{.HostConfig.Memory}}"
    out = subprocess.run([engine_name, "inspect", "-f", fmt, ctr], capture_output=True,
                         text=True, check=True).stdout
    assert out.split() == ["64", str(256 * 1024 * 1024)]


def _cgroup2() -> bool:
    return Path("/sys/fs/cgroup/cgroup.controllers").exists()


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
    # mode 0755, as a state directory's parent is: a mask over the state directory (hide)
    # makes its mount point there, and the engine makes that directory 0755 in the upper dir.
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,mode=0755", "tmpfs", str(mnt)], check=True)
    monkeypatch.setenv("XDG_STATE_HOME", str(mnt))
    yield mnt
    for session in store.list_sessions()[0]:
        with contextlib.suppress(Exception):
            engine_for(session.engine).release(session)
    subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.needs_root   # mounts a small tmpfs
def test_disk_full_in_the_upper_dir(ws, project: Path, engine_name: str, small_state: Path):
    ws("run", "--", "sh", "-c", "echo early > early.txt", check=True)
    proc = ws("run", "--", "sh", "-c", "head -c 20000000 /dev/zero > big.bin")
    assert proc.returncode != 0
    assert "No space left on device" in proc.stderr
    ws("run", "--", "rm", "-f", "big.bin", check=True)
    assert status(ws) == {str(project / "early.txt"): "added"}
    assert ws("run", "--", "cat", "early.txt", check=True).stdout == "early\n"


def test_commit_leaves_the_callers_files_and_modes(ws, project: Path, engine_name: str):
    """What the sandbox wrote is the caller's after commit: owner, group, modes, opaque dirs."""
    (project / "old").mkdir()
    (project / "old/a").write_text("a\n")
    script = ("mkdir -p d/e && echo x > d/f && printf '#!/bin/sh\\necho hi\\n' > tool.sh && "
              "chmod 755 tool.sh && chmod 750 d/e && echo more >> README.txt && "
              "rm -r old && mkdir old && echo b > old/b")
    ws("run", "-c", script, check=True)
    ws("commit", check=True)
    assert not (project / "old/a").exists() and (project / "old/b").read_text() == "b\n"
    modes = {}
    for path in [project, *project.rglob("*")]:
        st = path.lstat()
        assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid()), path
        modes[str(path.relative_to(project))] = st.st_mode & 0o7777
    assert modes == {".": 0o755, "README.txt": 0o644, "tool.sh": 0o755, "d": 0o755,
                     "d/e": 0o750, "d/f": 0o644, "old": 0o755, "old/b": 0o644}
    assert status(ws) == {}
    assert ws("run", "--", "./tool.sh", check=True).stdout == "hi\n"


def test_tarstream_on_the_images_python(tmp_path: Path, engine_name: str):
    """The image's python (Debian 12's 3.11.2, no extractall filter) unpacks streams safely too."""
    repo = Path(__file__).resolve().parents[2]
    out = tmp_path / "out"
    out.mkdir()
    userns = engine_for(engine_name).identity().get("userns")
    argv = [engine_name, "run", "--rm", "--network", "none", "-u", f"{os.getuid()}:{os.getgid()}",
            *([f"--userns={userns}"] if userns else []),
            "-v", f"{repo}:/src:ro", "-v", f"{out}:/out", config.load(None)["container.image"],
            "python3", "-I", "/src/tests/changes/tarstream_cases.py", "/out"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok ")


# -- doctor: "works" only after a real call; each known break named with its fix ----------------


def _doctor(engine_name: str, project: Path, tmp_path: Path, python: str = sys.executable,
            **env: str) -> dict[str, dict[str, object]]:
    """``workspace doctor --engine NAME --json`` as {check name: check}; probes go to tmp_path."""
    proc = subprocess.run([python, "-m", "manager", "doctor", "--engine", engine_name, "--json"],
                          cwd=project, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TMPDIR": str(tmp_path), **env})
    assert proc.returncode in (0, 1), proc.stderr
    checks = json.loads(proc.stdout)["engines"][engine_name]
    return {c["name"]: c for c in checks}


def _failed(checks: dict[str, dict[str, object]]) -> list[str]:
    return [name for name, c in checks.items() if not c["ok"]]


def test_doctor_works_only_after_a_real_call(project: Path, tmp_path: Path, engine_name: str):
    checks = _doctor(engine_name, project, tmp_path)
    assert _failed(checks) == [] and "a sandboxed call works" in checks
    # The probe's container, state and overlay work dir are gone again.
    assert list(tmp_path.glob("workspace-probe-*")) == list(tmp_path.glob("workspace-confine-probe-*")) == []
    leftovers = subprocess.run([engine_name, "ps", "-aq", "--filter",
                                f"label=org.workspace.state={tmp_path}"],
                               capture_output=True, text=True, check=True).stdout
    assert leftovers == ""


def test_doctor_names_a_missing_image(project: Path, tmp_path: Path, engine_name: str):
    checks = _doctor(engine_name, project, tmp_path,
                     WORKSPACE_CONTAINER__IMAGE=f"workspace-missing-{uuid.uuid4().hex[:6]}")
    assert _failed(checks)[0] == "image present"
    assert "workspace image build" in str(checks["image present"]["fix"])
    assert checks["a sandboxed call works"]["detail"] == "not checked: an earlier check failed"


def test_doctor_names_a_failing_engine(project: Path, tmp_path: Path, engine_name: str):
    """An engine binary that cannot reach its daemon or storage."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    broken = bin_dir / engine_name
    broken.write_text("#!/bin/sh\necho 'Error: cannot connect to the engine' >&2\nexit 125\n")
    broken.chmod(0o755)
    checks = _doctor(engine_name, project, tmp_path, PATH=f"{bin_dir}:{os.environ['PATH']}")
    assert _failed(checks)[0] == "daemon reachable"
    assert "cannot connect to the engine" in str(checks["daemon reachable"]["detail"])
    assert checks["daemon reachable"]["fix"]


def test_doctor_names_an_image_that_cannot_serve_calls(project: Path, tmp_path: Path,
                                                       engine_name: str):
    """The base image runs containers (the overlay probe passes) but cannot hold a session."""
    checks = _doctor(engine_name, project, tmp_path,
                     WORKSPACE_CONTAINER__IMAGE="workspace-base:bookworm")
    assert _failed(checks) == ["a sandboxed call works"]
    assert "FROM workspace-sandbox" in str(checks["a sandboxed call works"]["fix"])
    assert list(tmp_path.glob("workspace-probe-*")) == list(tmp_path.glob("workspace-confine-probe-*")) == []
    # The hide probe's session (in this state dir) failed its call too: its container went.
    leftovers = subprocess.run([engine_name, "ps", "-aq", "--filter",
                                f"label=org.workspace.state={paths.state_home()}"],
                               capture_output=True, text=True, check=True).stdout
    assert leftovers == ""


def _python_without_whales(tmp_path: Path) -> str:
    """A real environment with workspace and PyYAML but not python-on-whales (a bare install)."""
    import yaml

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    lib = tmp_path / "lib"
    lib.mkdir()
    for name in ("yaml", "_yaml"):
        src = Path(yaml.__file__).parents[1] / name
        if src.is_dir():
            shutil.copytree(src, lib / name)
    (site,) = venv.glob("lib/python3*/site-packages")
    (site / "workspace.pth").write_text(f"{Path(__file__).resolve().parents[2]}\n{lib}\n")
    return str(venv / "bin/python")


def test_without_python_on_whales_doctor_and_calls_say_so(project: Path, tmp_path: Path,
                                                          engine_name: str):
    python = _python_without_whales(tmp_path)
    checks = _doctor(engine_name, project, tmp_path, python=python)
    assert _failed(checks)[0] == "python-on-whales installed"
    assert "reinstall workspace" in str(checks["python-on-whales installed"]["fix"])
    proc = subprocess.run([python, "-m", "manager", "run", "--", "true"], cwd=project,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "WORKSPACE_ENGINE": engine_name})
    assert proc.returncode == 125 and "python-on-whales is not installed" in proc.stderr


def test_a_working_directory_missing_in_the_sandbox_is_refused(ws, project: Path,
                                                              engine_name: str):
    """Never somewhere else than asked: a cwd the container does not have is exit 125."""
    # On the host, outside the project, $HOME and /tmp (all overlaid): not in the container.
    elsewhere = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="ws-elsewhere-"))
    try:
        proc = ws("run", "--cwd", str(elsewhere), "--", "sh", "-c", "pwd; echo ran > ran.txt")
        assert proc.returncode == 125
        assert f"{elsewhere} does not exist in the sandbox" in proc.stderr and proc.stdout == ""
        assert status(ws) == {} and not (elsewhere / "ran.txt").exists()
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)
