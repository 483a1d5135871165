"""What a container session sees besides the project: $HOME and /tmp overlaid, the host's CA
bundle, host variables that name paths the container does not have."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from manager.engines.container import view as container_view
from manager.session import store
from tests.engines.support import status

LEFT_TO_IMAGE = "is not overlaid in this container: something is mounted below it"
ENGINES = pytest.mark.parametrize("engine_name", ["docker", "podman"], indirect=True)
pytestmark = [pytest.mark.as_user]


def test_a_directory_with_mounts_below_is_seen_as_such():
    """Rootless podman's overlays are made in a user namespace, where the kernel refuses a
    lower dir with mounts below it: those are found in mountinfo (escapes decoded)."""
    info = ("22 1 0:21 / /proc rw - proc proc rw\n"
            "90 30 0:50 / /tmp/a\\040b/small rw - tmpfs tmpfs rw\n")
    points = container_view.mount_points([info])
    assert "/tmp/a b/small" in points
    assert container_view.mounts_below("/tmp", points)
    assert not container_view.mounts_below("/tmp/a b/small", points)
    assert not container_view.mounts_below("/home/u", points)


def _session(project: Path) -> store.Session:
    session = store.current(project)
    assert session is not None
    return session


@pytest.mark.engine
@ENGINES
def test_home_and_tmp_are_overlaid_held_and_committed(ws, project: Path, tmp_path: Path,
                                                      engine_name: str):
    home = Path(os.environ["HOME"])
    (home / "old.txt").write_text("home file\n")
    script = tmp_path / "x.sh"                      # a script in /tmp, as an agent writes one
    script.write_text("echo from-tmp\n")
    first = ws("run", "--", "bash", str(script))
    if LEFT_TO_IMAGE in first.stderr:
        # The documented exception: rootless podman, a mount below /tmp in the namespace its
        # containers start from (the kernel refuses that lower dir in a user namespace).
        assert engine_name == "podman" and os.geteuid() != 0 and first.returncode == 127
        return
    assert (first.returncode, first.stdout) == (0, "from-tmp\n"), first.stderr
    assert ws("run", "--", "cat", str(home / "old.txt"), check=True).stdout == "home file\n"
    # Made and changed on the host after the container started: the next call sees them.
    script.write_text("echo changed\n")
    (home / "later.txt").write_text("later\n")
    out = ws("run", "-c", f"bash {script}; cat {home}/later.txt", check=True).stdout
    assert out == "changed\nlater\n"

    tag = uuid.uuid4().hex[:8]
    targets = [home / f"new-{tag}", Path(f"/tmp/ws-test-{tag}")]
    try:
        ws("run", "-c", "; ".join(f"echo {tag} > {t}" for t in targets), check=True)
        assert not any(t.exists() for t in targets), "a write escaped the sandbox"
        changes = status(ws)
        assert all(changes.get(str(t)) == "added" for t in targets), changes
        assert "elsewhere" in ws("status", check=True).stdout.lower()
        ws("commit", check=True)
        assert all(t.read_text() == f"{tag}\n" for t in targets)
        assert status(ws) == {}
    finally:
        for target in targets:
            target.unlink(missing_ok=True)


@pytest.mark.engine
@ENGINES
def test_tmp_keeps_its_mode_and_home_its_owner(ws, engine_name: str):
    out = ws("run", "-c", 'stat -c %a /tmp; stat -c %u "$HOME"; touch "$HOME/w"', check=True)
    assert out.stdout.split() == ["1777", str(os.getuid())]


@pytest.mark.engine
@ENGINES
def test_changes_in_home_survive_a_new_container(ws, project: Path, engine_name: str):
    home = Path(os.environ["HOME"])
    first = ws("run", "-c", 'echo kept > "$HOME/kept.txt"', check=True)
    if LEFT_TO_IMAGE in first.stderr:   # rootless podman's documented exception
        assert engine_name == "podman" and os.geteuid() != 0
        return
    session = _session(project)
    from manager import config
    from manager.engines import registry

    registry.make(engine_name, config.load(None)).release(session)
    again = ws("run", "--", "cat", str(home / "kept.txt"))
    assert status(ws).get(str(home / "kept.txt")) == "added"   # pending either way
    if LEFT_TO_IMAGE in again.stderr:   # rootless podman: a mount appeared below it since
        assert engine_name == "podman" and os.geteuid() != 0
        return
    assert (again.returncode, again.stdout) == (0, "kept\n"), again.stderr


CA_PROBE = ("import ssl; c = ssl.create_default_context(); "
            "print(sorted(str(sorted(x['subject'])) for x in c.get_ca_certs()))")


@pytest.mark.engine
@ENGINES
def test_tls_inside_trusts_what_the_host_trusts(ws, engine_name: str):
    bundle = container_view.system_bundle()
    assert bundle is not None, "this machine has no CA bundle (setup installs ca-certificates)"
    host = subprocess.run([sys.executable, "-c", CA_PROBE], capture_output=True, text=True,
                          check=True).stdout
    assert ws("run", "--", "python3", "-c", CA_PROBE, check=True).stdout == host
    proc = ws("run", "-c", f"echo x >> {bundle}")   # read-only: what the host trusts stays
    assert proc.returncode != 0


def _make_ca(directory: Path) -> Path:
    """A self-signed CA no image has (offline: openssl, which ca-certificates brings)."""
    pem = directory / "corp-ca.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=workspace test corp CA", "-keyout", str(directory / "key"),
                    "-out", str(pem)], check=True, capture_output=True)
    pem.chmod(0o644)
    directory.chmod(0o755)
    return pem


@pytest.mark.engine
@ENGINES
def test_a_ca_file_the_host_names_is_trusted_inside(ws, outside_dir: Path, engine_name: str):
    """A corporate CA named by SSL_CERT_FILE (outside $HOME and /tmp): mounted, trusted."""
    pem = _make_ca(outside_dir)
    env = dict(os.environ, SSL_CERT_FILE=str(pem), NODE_EXTRA_CA_CERTS=str(pem))
    script = (f'python3 -c "{CA_PROBE}"; printf "%s\\n" "$NODE_EXTRA_CA_CERTS"; '
              f'echo x >> {pem} || echo read-only')
    proc = subprocess.run([sys.executable, "-m", "manager", "run", "-c", script], env=env,
                          capture_output=True, text=True, check=True)
    certs, node, written = proc.stdout.splitlines()
    assert "workspace test corp CA" in certs
    assert (node, written) == (str(pem), "read-only")


@pytest.fixture
def outside_dir() -> Iterator[Path]:
    """A host directory neither in the project, $HOME nor /tmp: not in the container."""
    path = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="ws-outside-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.engine
@ENGINES
def test_variables_naming_host_paths_the_container_lacks_are_not_passed(
        ws, project: Path, outside_dir: Path, engine_name: str):
    home = Path(os.environ["HOME"])
    env = dict(os.environ, PIP_FIND_LINKS=str(outside_dir), WS_IN_HOME=str(home / "x"),
               WS_IN_PROJECT=str(project), WS_LIST=f"{project}:{outside_dir}",
               WS_WORD="plain", WS_SYSTEM="/usr/bin/env")
    script = 'for v in PIP_FIND_LINKS WS_IN_HOME WS_IN_PROJECT WS_LIST WS_WORD WS_SYSTEM; do ' \
             'printf "%s=%s\\n" "$v" "${!v-unset}"; done'
    proc = subprocess.run([sys.executable, "-m", "manager", "run", "-c", script], env=env,
                          cwd=project, capture_output=True, text=True, check=True)
    # $HOME's variable passes when $HOME is overlaid (rootless podman may leave it out).
    shown = any(str(home) == t or str(home).startswith(t.rstrip("/") + "/")
                for t in container_view.recorded_targets(_session(project)))
    assert proc.stdout.splitlines() == [
        "PIP_FIND_LINKS=unset", f"WS_IN_HOME={home / 'x' if shown else 'unset'}",
        f"WS_IN_PROJECT={project}", "WS_LIST=unset", "WS_WORD=plain", "WS_SYSTEM=/usr/bin/env"]


@pytest.mark.engine
@ENGINES
def test_a_home_outside_tmp_is_overlaid_on_its_own(ws, project: Path, outside_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   engine_name: str):
    home = outside_dir / "home"
    home.mkdir()
    (home / "old.txt").write_text("old\n")
    monkeypatch.setenv("HOME", str(home))
    out = ws("run", "-c", 'cat "$HOME/old.txt"; echo new > "$HOME/new.txt"', check=True)
    assert out.stdout == "old\n" and not (home / "new.txt").exists()
    assert status(ws).get(str(home / "new.txt")) == "added"
    assert str(home) in container_view.recorded_targets(_session(project))
